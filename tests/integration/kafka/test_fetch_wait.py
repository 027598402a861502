"""Fetch's max_wait_ms is a wait on the brokers' long poll: a Fetch parked on an empty
partition (its wait held on the broker, as the gateway's gauge shows) answers with the record
produced during the wait, and the long poll is counted as ended by data."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest
import requests
from kafka import KafkaProducer
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.record import MemoryRecords
from tidemq.gatewaykafka.codec import build

from tests.integration.kafka.harness import read_frame

pytestmark = pytest.mark.slow

TOPIC, PARTITION = "k-longpoll", 1
VERSION = 11
WAIT_MS = 60_000   # far longer than the test: only data can end this Fetch early


def _metric(cluster, name: str, labels: str = "") -> float:
    text = requests.get(f"http://127.0.0.1:{cluster.extra['gateway_kafka'].metrics_port}"
                        "/metrics", timeout=5).text
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _fetch(bootstrap: str, offset: int, answers: list, *, partition: int = PARTITION,
           wait_ms: int = WAIT_MS, partition_max_bytes: int = 1 << 20) -> None:
    request = build(FetchRequest, {
        "replica_id": -1, "max_wait_ms": wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [], "topics": [{"topic": TOPIC, "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
             "log_start_offset": -1, "partition_max_bytes": partition_max_bytes}]}]}, VERSION)
    request.with_header(correlation_id=11, client_id="fetch-wait-test")
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=wait_ms / 1000 + 30) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        body = read_frame(sock)   # all of it: one recv may return less than a large answer
    answers.append(FetchResponse[VERSION].decode(body[4:], version=VERSION))


def _records(part) -> list[tuple[int, bytes | None, bytes | None]]:
    records = MemoryRecords(bytes(part.records))
    return [(r.offset, r.key, r.value) for batch in iter(records.next_batch, None)
            for r in batch]


def test_a_fetch_keeps_to_the_partitions_max_bytes_the_first_record_always(kafka_cluster,
                                                                           bootstrap):
    produced_before = _metric(kafka_cluster, "tidemq_gateway_kafka_records_produced_total")
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    values = [bytes([65 + i]) * 1000 for i in range(5)]
    first = producer.send(TOPIC, value=values[0], partition=0).get(15).offset
    for value in values[1:]:
        producer.send(TOPIC, value=value, partition=0).get(15)
    producer.close()
    assert _metric(kafka_cluster, "tidemq_gateway_kafka_records_produced_total") >= \
        produced_before + len(values)
    for max_bytes, most in ((2500, 2), (1, 1), (1 << 20, 5)):
        answers: list = []
        _fetch(bootstrap, first, answers, partition=0, wait_ms=0,
               partition_max_bytes=max_bytes)
        (part,) = answers[0].responses[0].partitions
        got = _records(part)
        assert part.error_code == 0 and 1 <= len(got) <= most, (max_bytes, got)
        assert got == [(first + i, None, values[i]) for i in range(len(got))]
        if max_bytes == 1 << 20:
            assert len(got) == 5


def test_compressed_records_keep_to_max_bytes_in_their_answered_size(bootstrap):
    """The brokers store a large compressible body compressed (the SDK's zstd), so their pull
    counts its stored size against max_bytes; the answer must keep to it in record sizes.
    librdkafka's 0082 (900 KiB records, 1 MB fetch.max.bytes) got 27 MB and refused it."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000,
                             max_request_size=1 << 20)
    values = [bytes([97 + i]) * 100_000 for i in range(5)]
    first = producer.send(TOPIC, value=values[0], partition=0).get(15).offset
    for value in values[1:]:
        producer.send(TOPIC, value=value, partition=0).get(15)
    producer.close()
    for max_bytes, most in ((250_000, 2), (1, 1)):
        answers: list = []
        _fetch(bootstrap, first, answers, partition=0, wait_ms=0,
               partition_max_bytes=max_bytes)
        (part,) = answers[0].responses[0].partitions
        got = _records(part)
        assert part.error_code == 0 and 1 <= len(got) <= most, (max_bytes, len(got))
        assert got == [(first + i, None, values[i]) for i in range(len(got))]
        assert len(got) == 1 or len(part.records) <= max_bytes


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
    assert _records(part) == [(end, b"k", b"during the wait")]
    assert _metric(kafka_cluster, "tidemq_gateway_kafka_fetch_long_polls_total",
                   '{outcome="data"}') > woken_before
