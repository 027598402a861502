"""Older client releases, unmodified, against gateway-kafka: confluent-kafka 2.10.1 (librdkafka
2.10), kafka-python 2.3.3 and aiokafka 0.12.0, each in the pinned venv beside the project's own
(tests/support/kafka_clients.py), round-trip null and empty keys and values, binary keys and
duplicate headers byte for byte, at consecutive offsets."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.kafka_clients import old_clients_python

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("old_clients") / "roundtrip.py"
VERSIONS = {"confluent": "2.10.1", "kafka-python": "2.3.3", "aiokafka": "0.12.0"}
RECORDS = [  # what roundtrip.py sends, as it prints them (hex; None = null)
    [None, b"no key".hex(), []],
    ["", "", [["h", "31"], ["h", "32"]]],
    [b"k".hex(), None, [["empty", ""]]],
    [bytes(range(256)).hex(), bytes(i % 251 for i in range(4096)).hex(),
     [["bin", bytes(range(16)).hex()]]],
]


@pytest.fixture(scope="module")
def python() -> Path:
    return old_clients_python()


@pytest.mark.parametrize("client", sorted(VERSIONS))
def test_an_older_client_round_trips_records(python, bootstrap, client):
    topic = f"k-old-{client}"
    done = subprocess.run([str(python), str(SCRIPT), client, bootstrap, topic],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["version"] == VERSIONS[client]
    first = result["offsets"][0]
    assert result["offsets"] == list(range(first, first + len(RECORDS)))
    assert result["got"] == RECORDS
