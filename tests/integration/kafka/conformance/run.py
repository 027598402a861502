"""kafka-python's own integration suite, from its 3.0.12 sdist on PyPI, against gateway-kafka.

    uv run --frozen python -m tests.integration.kafka.conformance.run [--ci] [pytest args]

Takes the sdist once into .data/kafka-conformance/ (`pip download --no-binary :all:` through
`uv tool run`, its SHA-256 checked), keeps its `test/` tree, starts a TideMQ cluster (two
broker groups) and gateway-kafka with the project's test support, and runs the suite's
`test/integration` against it as the suite takes an external broker: KAFKA_URI (the
gateway's listener) and KAFKA_VERSION. The clients are the project's kafka-python 3.0.12.
The tests in expected_failures.txt are expected to fail (expected.py); `--ci` runs only the
producer and consumer tests (CI_FILES), a quicker run (CI runs the whole suite: about two
minutes). The sdist ships the suite without `test/__init__.py` and `test/service.py`:
an empty package file and service_shim.py stand in (docs/kafka.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
VERSION = "3.0.12"
SDIST = f"kafka_python-{VERSION}.tar.gz"
SHA256 = "4ccda3616b9aa5c353d74a97f2770d6cd1b950890d77ab0e8890e09a48eeed65"
CACHE = REPO / ".data" / "kafka-conformance"
SUITE = CACHE / f"kafka-python-{VERSION}"
# The suite picks its expectations and skips by the broker's Kafka version: 2.4, the release
# kafka-python infers from the API versions the gateway advertises (ApiVersions v3).
KAFKA_VERSION = "2.4.0"
# The suite's groups use 3 s sessions, below the brokers' 6 s floor (Kafka's default too: the
# suite's own broker configuration lowers it).
CLUSTER_ENV = {"TIDEMQ_GROUP_MIN_SESSION_TIMEOUT_MS": "1000"}
CI_FILES = ["test/integration/test_producer_integration.py",
            "test/integration/test_consumer_integration.py"]
TEST_TIMEOUT_S = 120


def fetch_suite() -> Path:
    """The suite's root (holding `test/`), taken from the pinned sdist on first use."""
    if (SUITE / "test" / "service.py").exists():
        return SUITE
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / SDIST
    if not archive.exists():
        subprocess.run(["uv", "tool", "run", "pip", "download", f"kafka-python=={VERSION}",
                        "--no-binary", ":all:", "--no-deps", "--quiet", "-d", str(CACHE)],
                       check=True)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SHA256:
        archive.unlink()
        raise SystemExit(f"{SDIST}: SHA-256 {digest}, expected {SHA256}; removed, run again")
    prefix = f"kafka_python-{VERSION}/test/"
    staging = Path(tempfile.mkdtemp(dir=CACHE))
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and
                   (m.isfile() or m.isdir())]
        tar.extractall(staging, members=members, filter="data")
    root = staging / f"kafka_python-{VERSION}"
    (root / "test" / "__init__.py").write_text("")
    shutil.copy(Path(__file__).with_name("service_shim.py"), root / "test" / "service.py")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "no-kafka-distribution").mkdir()
    shutil.rmtree(SUITE, ignore_errors=True)
    root.rename(SUITE)
    shutil.rmtree(staging, ignore_errors=True)
    return SUITE


def run(pytest_args: list[str], *, ci: bool = False, basetemp: Path | None = None) -> int:
    """Start a cluster and gateway-kafka, run the suite against them; pytest's exit code."""
    sys.path.insert(0, str(REPO))
    from tests.integration.kafka.conftest import start_kafka_gateway
    from tests.support.cluster import running_cluster

    suite = fetch_suite()
    with tempfile.TemporaryDirectory(prefix="kafka-conformance-", dir=basetemp) as tmp, \
            running_cluster(Path(tmp), env=CLUSTER_ENV) as cluster:
        # as the suite's own broker is configured: topics auto-created with 4 partitions
        gateway = start_kafka_gateway(cluster, ["--auto-create-topics", "true",
                                                "--default-partitions", "4"])
        env = {**os.environ, "KAFKA_URI": f"kafka://{gateway.addr}",
               "KAFKA_VERSION": KAFKA_VERSION,
               # the fixtures insist on a Kafka distribution's directory, never used here
               "KAFKA_ROOT": str(suite / "no-kafka-distribution"),
               "PYTHONPATH": os.pathsep.join([str(suite), str(REPO)])}
        command = [sys.executable, "-m", "pytest", "-c", str(suite / "pytest.ini"),
                   "--rootdir", str(suite), "-p", "no:randomly", "-p", "no:cacheprovider",
                   "-p", "tests.integration.kafka.conformance.expected",
                   "--timeout", str(TEST_TIMEOUT_S), "-q", "-rfEX",
                   "--basetemp", str(Path(tmp) / "suite"),
                   *pytest_args]
        if not any(a.startswith("test/") for a in pytest_args):
            command += CI_FILES if ci else ["test/integration"]
        return subprocess.call(command, cwd=suite, env=env)


def main(argv: list[str]) -> int:
    ci = "--ci" in argv
    return run([a for a in argv if a != "--ci"], ci=ci)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
