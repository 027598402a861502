"""kafkajs 2.2.4 (npm, pinned in node/) against gateway-kafka: each test runs one scenario of
node/kafkajs.mjs in a real `node` process and asserts on the JSON line it prints. Install the
client with `make node-deps`; without node the tests skip locally and fail under CI=true."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.support.tools import IN_CI

pytestmark = pytest.mark.slow

PROJECT = Path(__file__).parent / "node"
INSTALL = "make node-deps (npm ci --prefix tests/integration/kafka/node)"
SCENARIO_TIMEOUT_MS = 60_000


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed (Debian: apt-get install nodejs npm), then " + INSTALL
    if not (PROJECT / "node_modules" / "kafkajs").is_dir():
        return f"kafkajs is not installed: {INSTALL}"
    return None


@pytest.fixture(scope="module")
def kafkajs(request):
    if missing := _missing():   # checked before the cluster starts
        if IN_CI:
            pytest.fail(missing)
        pytest.skip(missing)
    bootstrap = request.getfixturevalue("bootstrap")

    def run(scenario: str, **options) -> dict:
        argv = ["node", str(PROJECT / "kafkajs.mjs"), scenario, "--broker", bootstrap,
                "--timeout-ms", str(SCENARIO_TIMEOUT_MS)]
        for name, value in options.items():
            argv += [f"--{name}", str(value)]
        done = subprocess.run(argv, capture_output=True, text=True,
                              timeout=SCENARIO_TIMEOUT_MS / 1000 * 2 + 60)
        sys.stderr.write(done.stderr[-4000:])
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run


def _b(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def test_kafkajs_round_trip(kafkajs):
    result = kafkajs("roundtrip", topic="k-kafkajs", group="k-kafkajs-rt", partition=1)
    assert [s["partition"] for s in result["sent"]] == [1]
    base = result["sent"][0]["baseOffset"]
    got = [m for m in result["received"]["only"] if m["partition"] == 1 and m["offset"] >= base]
    assert [m["offset"] for m in got] == list(range(base, base + 5))
    assert [(_b(m["key"]), _b(m["value"])) for m in got] == [
        (b"k-1", b"plain"), (None, b"no key"), (bytes([0, 1, 2, 255]), bytes([9, 8, 7])),
        (b"k-empty", b""), (b"k-null", None)]
    assert [(k, _b(v)) for k, v in got[0]["headers"]] == [("h", b"1")]
    assert [(k, _b(v)) for k, v in got[2]["headers"]] == [("bin", bytes([0, 255]))]


def test_kafkajs_group_shares_partitions_and_commits(kafkajs, bootstrap):
    topic, group, count, rounds = "k-kafkajs-group", "k-kafkajs-members", 40, 6
    result = kafkajs("group", topic=topic, group=group, partitions=4, count=count,
                     rounds=rounds)
    # one generation in which the two members hold disjoint partitions covering the topic
    assert result["settled"], f"the members never settled: {result['assigned']}"
    a, b = set(result["settled"]["a"]), set(result["settled"]["b"])
    assert a and b and not a & b and a | b == {0, 1, 2, 3}
    # ... and keep holding through steady consumption: no member joined another generation
    # (a rebalance would make both rejoin), the coordinator still has the same two members
    # with the same partitions, and each steady record went to its partition's owner
    steady = result["steady"]
    assert steady["joins"] == result["joins"], \
        f"rebalanced after settling: generations joined {result['joins']} -> {steady['joins']}"
    assert steady["assigned"] == result["settled"]
    assert steady["group"] == {"state": "Stable", "members": sorted([sorted(a), sorted(b)])}
    owner = {p: name for name, held in result["settled"].items() for p in held}
    steady_records = [(name, m["partition"], _b(m["value"]))
                      for name in ("a", "b") for m in result["received"][name]
                      if _b(m["value"]).startswith(b"steady-")]
    assert sorted(value for *_, value in steady_records) == sorted(
        b"steady-%d-%d" % (r, p) for r in range(rounds) for p in range(4))
    assert all(owner[partition] == name for name, partition, _ in steady_records)
    received = [(m["partition"], m["offset"], _b(m["value"]))
                for m in result["received"]["a"] + result["received"]["b"]]
    assert {value for _, _, value in received} >= {b"value-%d" % i for i in range(count)}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    committed = {p: consumer.committed(TopicPartition(topic, p)) for p in range(4)}
    consumer.close()
    assert committed == dict.fromkeys(range(4), count // 4 + rounds)
