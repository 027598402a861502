"""Fetch's max_wait_ms is a wait on the brokers' long poll: a Fetch parked on an empty
partition (its wait held on the broker, as the gateway's gauge shows) answers with the record
produced during the wait, and the long poll is counted as ended by data."""

from __future__ import annotations

import re
import socket
import struct
import threading
import time

import pytest
import requests
from kafka import KafkaProducer
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.record import MemoryRecords
from tidemq.gatewaykafka.codec import build

pytestmark = pytest.mark.slow

TOPIC, PARTITION = "k-longpoll", 1
VERSION = 11
WAIT_MS = 60_000   # far longer than the test: only data can end this Fetch early


def _metric(cluster, name: str, labels: str = "") -> float:
    text = requests.get(f"http://127.0.0.1:{cluster.extra['gateway_kafka'].metrics_port}"
                        "/metrics", timeout=5).text
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _fetch(bootstrap: str, offset: int, answers: list) -> None:
    request = build(FetchRequest, {
        "replica_id": -1, "max_wait_ms": WAIT_MS, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [], "topics": [{"topic": TOPIC, "partitions": [
            {"partition": PARTITION, "current_leader_epoch": -1, "fetch_offset": offset,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}, VERSION)
    request.with_header(correlation_id=11, client_id="fetch-wait-test")
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=WAIT_MS / 1000 + 30) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        body = sock.recv(size, socket.MSG_WAITALL)
    answers.append(FetchResponse[VERSION].decode(body[4:], version=VERSION))


def test_a_waiting_fetch_returns_the_record_produced_during_its_wait(kafka_cluster, bootstrap):
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    end = producer.send(TOPIC, value=b"before", partition=PARTITION).get(15).offset + 1
    woken_before = _metric(kafka_cluster, "tidemq_gateway_kafka_fetch_long_polls_total",
                           '{outcome="data"}')

    answers: list = []
    fetcher = threading.Thread(target=_fetch, args=(bootstrap, end, answers), daemon=True)
    fetcher.start()
    deadline = time.monotonic() + 30   # the Fetch found nothing and holds a long poll
    while _metric(kafka_cluster, "tidemq_gateway_kafka_fetch_long_polls_held") < 1:
        assert time.monotonic() < deadline, "the Fetch never waited on a long poll"
        assert fetcher.is_alive(), f"the Fetch answered without waiting: {answers}"
        time.sleep(0.05)

    producer.send(TOPIC, key=b"k", value=b"during the wait", partition=PARTITION).get(15)
    producer.close()
    fetcher.join(WAIT_MS / 1000 + 30)
    (answer,) = answers
    (part,) = answer.responses[0].partitions
    assert part.error_code == 0 and part.high_watermark == end + 1
    records = MemoryRecords(bytes(part.records))
    got = [(r.offset, r.key, r.value) for batch in iter(records.next_batch, None)
           for r in batch]
    assert got == [(end, b"k", b"during the wait")]
    assert _metric(kafka_cluster, "tidemq_gateway_kafka_fetch_long_polls_total",
                   '{outcome="data"}') > woken_before
