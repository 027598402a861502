"""Every benchmark still runs end to end in its quick mode and prints its figures beside the
same-run baseline (timings are the benchmarks' business, never asserted here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from deploy.topology import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

BENCHMARKS = {
    "store": (["-m", "bench.store", "--quick"],
              ["raw sequential write", "ASYNC_FLUSH batch 256", "asyncio appenders",
               "appender threads",
               "abnormal recovery"]),
    # one fault of each kind and a 5 s loaded run (its CPU hogs would hold both cores for the
    # quick run's 20 s): every line still printed, at a third of the quick run's CPU
    "compaction": (["-m", "bench.compaction", "--quick"],
                   ["disk, same run: sequential write", "compaction pass, no budget",
                    "x the raw read rate", "no compaction", "pass at the default 32 MiB/s budget",
                    "pass with no budget"]),
    "failover": (["-m", "bench.failover", "--quick", "--faults", "1", "--loaded-s", "5"],
                 ["same run", "3 replicas SYNC_MASTER", "replication lag under load",
                  "write outage after a master fault", "SIGKILL x", "SIGSTOP x",
                  "false failovers"]),
    "replication": (["-m", "bench.replication", "--quick"],
                    ["catch-up of", "raw asyncio TCP", "single store", "SYNC_MASTER with one",
                     "over mutually authenticated TLS"]),
    "e2e_latency": (["bench/e2e_latency/run.py", "--quick"],
                    ["median", "TideMQ produce", "Redis Streams same run"]),
    "config": (["bench/config/run.py", "--quick"],
               ["3 member(s)", "raw etcd", "write/s (1 thr)", "CAS/s (4 thr)", "read/s",
                "CAS compares failed", "watch events lost", "watch latency p99",
                "config-center overhead per call"]),
    "config_one_member": (["bench/config/run.py", "--quick", "--members", "1"],
                          ["1 member(s)", "raw etcd", "write/s", "watch latency p50"]),
    "consumption": (["bench/consumption/run.py", "--quick"],
                    ["PullConsumer", "SimpleConsumer pop", "HTTP pop", "ack_async each",
                     "Redis Streams XREADGROUP 32 + XACK each", "empty unary gRPC call",
                     "empty wire-protocol call",
                     "ratio ack_many / one XACK"]),
    "quota": (["bench/quota/run.py", "--quick"],
              ["SDK producer, no quota (baseline, same run)", "SDK producer (waits throttle)",
               "ignores throttle, 4 threads", "broker CPU per send, no quota (same run)",
               "charged to 2 quotas"]),
    "schedule": (["bench/schedule/run.py", "--quick"],
                 ["ordinary send (same run)", "exact time (wheel)", "level 1 (level queue)"]),
    "filter": (["bench/filter/run.py", "--quick"],
               ["unfiltered pull (baseline)", "tag hash", "SQL92", "evaluation alone"]),
    "kafka_compat": (["bench/kafka_compat/run.py", "--quick"],
                     ["confluent-kafka", "native TideMQ", "Redis Streams", "mock cluster",
                      "produce 1 KiB, acks=all", "consume 1 KiB", "per record"]),
    "rocketmq_compat": (["bench/rocketmq_compat/run.py", "--quick"],
                        ["native TideMQ", "via gateway-grpc", "produce, sync", "receive, pop 32",
                         "1 batch on the wire",
                         "same-run floor, a bare Python grpc.server", "x the sync floor",
                         "x the client's ceiling",
                         "committed transaction visible"]),
}


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_runs_and_prints_its_comparison(name, tmp_path):
    argv, expected = BENCHMARKS[name]
    done = subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=540)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    missing = [line for line in expected if line not in done.stdout]
    assert not missing, f"{name} no longer prints {missing}:\n{done.stdout[-4000:]}"
