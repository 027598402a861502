"""Fixtures shared by every test package: real processes, cleaned up whatever happens."""

from __future__ import annotations

import os

# Before anything imports grpc: with gRPC's fork support on (its default), a child forked to
# exec another program (subprocess with preexec_fn, as pyspark starts its JVM) may crash
# before the exec when channels exist (grpc/grpc#43055: ~15 % of such forks here; the Spark
# JVM then "exited before sending its port number"). Nothing in the tests forks to go on
# using gRPC. The analytics package sets the same for Spark drivers.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

# Every JVM the tests start (PySpark drivers, the standalone Spark master, workers and
# executors) lives for seconds on small data: the optimising JIT and the parallel GC's threads
# cost it more CPU than they save. C1 only and the serial GC took tests/integration/analytics
# from 504 to 363 CPU-seconds (and 433 to 332 s) on the 2-core machine. Tests only: a
# deployment's long-running Spark keeps the JVM's defaults.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# The suite's brokers store on the host's own file system, which other work on the machine
# may fill past the disk guard's marks (75 % warn and forced clean-up, 85 % refusal): a whole
# CI run once failed with "the topic has no writable queue on any master" at 86 %. The
# brokers the tests start inherit these marks (TIDEMQ_* settings; a flag overrides them);
# tests of the disk guard and retention give theirs explicitly (test_disk_full.py) or stub
# the ratio (tests/unit/store).
os.environ.setdefault("TIDEMQ_DISK_WARN_RATIO", "0.98")
os.environ.setdefault("TIDEMQ_DISK_FULL_RATIO", "0.99")
os.environ.setdefault("TIDEMQ_DISK_MAX_USED_RATIO", "0.99")

import pytest  # noqa: E402
from hypothesis import settings

from tests.support.processes import RedisServer, ServiceProcess, start_redis, start_service

# Hypothesis' per-example deadline is a timing assertion: on a loaded 2-core CI machine it
# fails correct code. Examples are still bounded by pytest-timeout; a failure prints the blob
# that replays it.
settings.register_profile("tidemq", deadline=None, print_blob=True)
settings.load_profile("tidemq")


# Modules that run a JVM (Spark) or the Docker engine (image builds, the compose stack). Under
# pytest-xdist one worker runs them all, one after another, starting first: two JVMs, or a JVM
# beside image builds, on a 2-core machine slow each other past their timeouts.
HEAVY_MODULES = ("tests/compose/", "tests/integration/analytics/")


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _heavy(nodeid: str) -> bool:
    return _module(nodeid).startswith(HEAVY_MODULES)


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (what `make test` runs) with the heavy modules as one file: each
    module goes to one worker whole (its module-scoped fixtures start once), and the heavy
    ones to one worker together, in collection order (`--no-loadscope-reorder`)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "heavy modules" if _heavy(nodeid) else _module(nodeid)

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Unit tests first (a stable sort: each module's tests stay together): a broken build
    fails in minutes, not after the integration suite. On a pytest-xdist worker the heavy
    modules go before them: the longest unit starts at once while the other workers run the
    unit tests."""
    distributed = hasattr(config, "workerinput")
    items.sort(key=lambda item: (not (distributed and _heavy(item.nodeid)),
                                 not item.nodeid.startswith("tests/unit/")))


@pytest.fixture(autouse=True)
def fresh_circuit_breakers():
    """Circuit breakers are per address and live for the process (every client of an endpoint
    shares one), and retune_breakers changes them all: a test must not inherit another's
    breaker through a reused ephemeral port, nor its thresholds."""
    yield
    from tidemq.common import rpc

    with rpc._breakers_lock:
        rpc._breakers.clear()
        rpc._retuned.clear()


# --- shared clusters --------------------------------------------------------------------------
# Starting a cluster (Redis, config center, two name servers, brokers) costs seconds of a busy
# machine; most modules only need one to send, pop and read on. Tests that only *use* a plain
# cluster share one per shape for the whole session. A sharer owns its topics and groups (names
# no other sharer uses), and never restarts or kills a process, changes dynamic settings or ACLs,
# nor asserts anything about the whole cluster (every topic, every defined group): such a test
# starts its own cluster with `running_cluster`. Started on first use, killed at session end.


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory):
    """A plain cluster with two broker groups (broker-a, broker-b), no gateway."""
    from tests.support.cluster import running_cluster

    with running_cluster(tmp_path_factory.mktemp("shared-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def shared_gateway_cluster(shared_cluster):
    """`shared_cluster` with the HTTP gateway (two workers) started on it."""
    shared_cluster.start_gateway(workers=2)
    return shared_cluster


@pytest.fixture(scope="session")
def shared_one_broker_cluster(tmp_path_factory):
    """A plain cluster with one broker group (broker-a), no gateway."""
    from tests.support.cluster import running_cluster

    with running_cluster(tmp_path_factory.mktemp("shared-one-broker"),
                         broker_names=("broker-a",)) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def shared_one_broker_gateway_cluster(shared_one_broker_cluster):
    """`shared_one_broker_cluster` with the HTTP gateway (two workers) started on it."""
    shared_one_broker_cluster.start_gateway(workers=2)
    return shared_one_broker_cluster


@pytest.fixture
def etcd_server(tmp_path):
    """One etcd member (tests.support.etcd), killed at teardown; `endpoints` is what a config
    center's --etcd-endpoints takes."""
    from tests.support.etcd import start_etcd

    cluster = start_etcd(tmp_path)
    yield cluster
    cluster.kill()


@pytest.fixture
def redis_server(tmp_path) -> RedisServer:
    server = start_redis(tmp_path)
    yield server
    server.kill()


@pytest.fixture
def services(tmp_path):
    """Start services with `services(module, args)`; every one is stopped at teardown."""
    started: list[ServiceProcess] = []

    def start(module: str, args: list[str] | None = None, **kwargs) -> ServiceProcess:
        process = start_service(module, args or [], tmp_path, **kwargs)
        started.append(process)
        return process

    yield start
    for process in reversed(started):
        process.kill()
