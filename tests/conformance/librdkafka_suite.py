"""`make kafka-conformance-librdkafka`: librdkafka's own test suite against gateway-kafka (#40).

librdkafka's sources, its `tests/` directory included, ship in the `@confluentinc/kafka-javascript`
npm package (`deps/librdkafka`), pinned with its integrity hash in
`tests/conformance/librdkafka/package-lock.json` and installed with `npm ci --ignore-scripts`
(nothing of the Node binding is built or downloaded). This script then builds the library and
its `test-runner` once into `.data/librdkafka/<version>/` (a C compiler, make and libssl-dev;
no GSSAPI, curl or zstd), starts a test cluster the way the integration tests do (etcd, a
config center, two name servers, two broker groups) with two gateway-kafka instances, writes
`test.conf` naming both, and runs each test of SUBSET on its own (`TESTS=<n> ./test-runner
-p1`), printing one line per test and the total time. Exit status: the number of tests that
failed or left no PASSED line in the runner's summary (0 = green). The subset and the reason for each test left out are in docs/kafka.md.

    make kafka-conformance-librdkafka            # the whole subset
    KAFKA_CONFORMANCE_TESTS=0012,0030 make kafka-conformance-librdkafka   # some of it
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.cluster import running_cluster

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = Path(__file__).resolve().parent / "librdkafka"
SOURCES = PACKAGE_DIR / "node_modules" / "@confluentinc" / "kafka-javascript" / "deps" / \
    "librdkafka"
BUILD_ROOT = ROOT / ".data" / "librdkafka"
CONFIGURE = ["--disable-gssapi", "--disable-curl", "--disable-zstd", "--enable-static"]

# The curated subset: produce, consume, consumer groups, offsets, idempotence (docs/kafka.md).
SUBSET = {
    "0002": "produce to an unknown partition fails per message",
    "0005": "per-partition produce order",
    "0008": "acks 0, 1 and all",
    "0012": "produce then consume, several partitions",
    "0013": "null and empty keys and values",
    "0014": "consume, reconsume from stored offsets",
    "0015": "offsets seek",
    "0017": "compression: gzip, snappy, lz4",
    "0018": "consumer group termination",
    "0020": "destroy without hanging",
    "0021": "topic handle destroy",
    "0022": "consume batch",
    "0026": "consume pause and resume",
    "0029": "assign with offsets",
    "0030": "offset commit: sync, async, auto",
    "0031": "query offsets and watermarks",
    "0034": "offset reset: earliest, latest, error",
    "0036": "partial fetch",
    "0041": "fetch.max.bytes",
    "0048": "partitioners",
    "0050": "subscribe adds topics",
    "0051": "assign adds partitions",
    "0056": "balanced consumer group, multi-threaded",
    "0082": "fetch max bytes per partition",
    "0094": "idempotent producer: message timeout",
    # the second batch tried (all of these pass too)
    "0007": "topic auto-creation on produce",
    "0016": "client software name and version (KIP-511)",
    "0035": "ApiVersions",
    "0039": "delivery reports as events",
    "0040": "IO event notification",
    "0042": "many topics",
    "0044": "partition count change seen by a producer",
    "0057": "invalid topic names refused",
    "0059": "offsets for times, binary search",
    "0060": "op priorities",
    "0063": "cluster id",
    "0065": "yield from callbacks",
    "0067": "consume an empty topic",
    "0069": "consumer sees added partitions",
    "0070": "null and empty (C++)",
    "0073": "headers",
    "0083": "callback events",
    "0084": "destroy flags",
    "0085": "headers (C++)",
    "0086": "purge in-flight and queued messages",
    "0089": "max.poll.interval.ms",
    "0090": "idempotent producer",
    "0091": "max.poll.interval.ms timeout",
    "0093": "consumer head-of-line blocking",
    "0112": "assign an unknown partition",
    "0118": "commit during a rebalance",
    "0122": "buffers cleaned after a rebalance",
    "0123": "connections.max.idle.ms",
    "0125": "immediate flush",
    "0127": "fetch queue backoff",
    "0132": "assignment strategy ordering",
    # the third batch (issue #38's follow-ups: commit metadata, long keys, dotted names)
    "0003": "message.max.bytes, a 99 000-byte key",
    "0054": "offsets for times (CreateTime)",
    "0099": "commit metadata",
    "0114": "sticky partitioning (a topic name with '.')",
    "0130": "stored offsets with metadata",
    "0140": "commit metadata (C++)",
}


def main() -> int:
    chosen = [t.strip() for t in os.environ.get("KAFKA_CONFORMANCE_TESTS", "").split(",")
              if t.strip()] or list(SUBSET)
    tests_dir = build()
    with tempfile.TemporaryDirectory(prefix="tidemq-librdkafka-") as tmp, \
            running_cluster(Path(tmp)) as cluster:
        gateways = [cluster.start("tidemq.gatewaykafka", [
            "--namesrv-addrs", cluster.namesrv_addrs, "--config-center",
            cluster.config_center.addr, "--advertised-host", "127.0.0.1",
            # the suite expects Kafka's auto.create.topics.enable with 4 partitions (trivup's
            # num.partitions), as its clusters run
            "--auto-create-topics", "true", "--default-partitions", "4"]) for _ in range(2)]
        bootstrap = ",".join(g.addr for g in gateways)
        (tests_dir / "test.conf").write_text(
            f"metadata.broker.list={bootstrap}\n"
            "test.timeout.multiplier=4\n"      # a loaded 2-core machine
            "test.topic.random=true\n"         # runs never meet each other's topics
            "broker.address.family=v4\n")
        print(f"librdkafka {version()} test-runner against gateway-kafka {bootstrap}",
              flush=True)
        started = time.monotonic()
        results = {test: run_one(tests_dir, test) for test in chosen}
        total = time.monotonic() - started
    failed = [t for t, (ok, _) in results.items() if not ok]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed "
          f"({', '.join(failed) or 'none'}) in {total:.0f} s")
    return len(failed)


def run_one(tests_dir: Path, test: str) -> tuple[bool, float]:
    library = f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}"
    env = {**os.environ, "TESTS": test, "TEST_KAFKA_VERSION": "3.9.0",
           "TEST_LEVEL": os.environ.get("TEST_LEVEL", "1"),
           # the library just built, not a system one (Debian's librdkafka1 may be there)
           "LD_LIBRARY_PATH": f"{library}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    started = time.monotonic()
    log = tests_dir / f"tidemq-{test}.log"
    with open(log, "wb") as out:
        # -L: not the test number's local variants (mock cluster, no broker): not about us
        code = subprocess.call(["./test-runner", "-p1", "-L"], cwd=tests_dir, env=env, stdout=out,
                               stderr=subprocess.STDOUT, timeout=1800)
    took = time.monotonic() - started
    summary = [line for line in log.read_text(errors="replace").splitlines()
               if f" {test}_" in line and "|" in line]
    skipped = bool(summary) and all("SKIPPED" in line for line in summary)
    # a pass is the runner's exit status and its summary saying PASSED for the test: a test it
    # filtered out, or a summary this parse no longer finds, proves nothing
    passed = any("PASSED" in line for line in summary)
    ok = code == 0 and passed and not skipped
    verdict = ("SKIPPED" if skipped else "PASS" if ok
               else "NO RESULT" if code == 0 else "FAIL")
    print(f"{test} {verdict} {took:6.1f} s  {SUBSET.get(test, '')}"
          + ("" if ok else f"  (log: {log})"), flush=True)
    return ok, took


def version() -> str:
    return json.loads((PACKAGE_DIR / "node_modules" / "@confluentinc" / "kafka-javascript" /
                       "package.json").read_text())["librdkafka"]


def build() -> Path:
    """The built tests directory (sources installed and built once, then reused)."""
    if not SOURCES.is_dir():
        if shutil.which("npm") is None:
            sys.exit("npm is not installed (Debian: apt-get install nodejs npm): librdkafka's "
                     "sources come from the @confluentinc/kafka-javascript npm package")
        subprocess.check_call(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund",
                               "--prefix", str(PACKAGE_DIR)])
    build_dir = BUILD_ROOT / version()
    runner = build_dir / "tests" / "test-runner"
    if runner.exists():
        return runner.parent
    for tool in ("make", "cc", "c++"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed: librdkafka's test-runner is built from source "
                     "(Debian: apt-get install build-essential libssl-dev zlib1g-dev)")
    if build_dir.exists():
        shutil.rmtree(build_dir)
    shutil.copytree(SOURCES, build_dir)
    jobs = str(os.cpu_count() or 1)
    subprocess.check_call(["./configure", *CONFIGURE], cwd=build_dir)
    subprocess.check_call(["make", "-j", jobs, "libs"], cwd=build_dir)
    subprocess.check_call(["make", "-j", jobs, "test-runner"], cwd=build_dir / "tests")
    return runner.parent


if __name__ == "__main__":
    sys.exit(main())
