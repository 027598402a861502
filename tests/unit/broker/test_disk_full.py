"""A full disk on the broker: producers' sends refused with STORAGE_FULL (broker, path, free
space named) while the broker's own writes go on; the registration turns read-only."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from tidemq.broker import metrics
from tidemq.broker.registration import BrokerIdentity, BrokerRegistrar
from tidemq.broker.store import DiskState, DiskUsage, MetadataFile, StorageFull
from tidemq.broker.topic_table import TopicConfig, TopicTable
from tidemq.common import errors, record

from tests.support.local_broker import LocalBroker

MIB = 1 << 20


def batch(topic, n):
    return b"".join(record.encode_message(record.OutgoingMessage(topic, b"m%d" % i))[0]
                    for i in range(n))


@pytest.fixture
def local(tmp_path):
    broker = LocalBroker(tmp_path, [TopicConfig("t", 1)])
    broker.messaging.broker_name = "broker-b"
    yield broker
    broker.close()


def fill(local, ratio):
    total = 1000 * MIB
    used = int(total * ratio)
    local.store.disk._usage_of = lambda path: DiskUsage(str(path), total, total - used, used)
    return local.store.disk.check()


def refused_count():
    return metrics.SEND_ERRORS.labels("STORAGE_FULL")._value.get()


def test_a_full_disk_refuses_producers_and_says_who_where_and_how_much(local):
    assert fill(local, 0.80) is DiskState.WARN
    local.messaging.admit_send()   # warned, not refused
    assert fill(local, 0.86) is DiskState.FULL
    before = refused_count()
    with pytest.raises(errors.StorageFull) as refused:
        local.messaging.admit_send()
    text = str(refused.value)
    assert text.startswith("STORAGE_FULL: broker broker-b refuses sends, its storage is full")
    assert str(local.store.config.data_dir) in text and "140.0 MiB free" in text
    assert "86.0% used" in text and "resume by themselves once use is below 85%" in text
    assert refused_count() == before + 1
    # The broker's own writes (acks, pop checkpoints, retries, deliveries) still go in.
    stored = asyncio.run(local.messaging.send("t", 0, batch("t", 2), 2))
    assert stored.first_queue_offset == 0
    assert fill(local, 0.5) is DiskState.OK
    local.messaging.admit_send()


def test_no_room_for_a_segment_is_storage_full_not_an_internal_error(local):
    def no_room(*_args, **_kwargs):
        raise local.store.disk.no_space(OSError(28, "No space left on device"))

    local.store.append_batch_async = no_room
    with pytest.raises(errors.StorageFull) as refused:
        asyncio.run(local.messaging.send("t", 0, batch("t", 1), 1))
    assert "broker broker-b refuses sends" in str(refused.value)
    assert "No space left on device" in str(refused.value)
    assert local.store.disk.state is DiskState.FULL


def test_storage_full_crosses_the_wire_as_itself():
    rebuilt = errors.from_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "STORAGE_FULL", "full")
    assert type(rebuilt) is errors.StorageFull and rebuilt.code == "STORAGE_FULL"
    assert isinstance(rebuilt, errors.ServiceUnavailable)   # nothing stored: send elsewhere
    assert (errors.StorageFull.http_status, errors.StorageFull.grpc_status) == (
        507, grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert StorageFull("x").code == "STORAGE_FULL"


def test_an_unwritable_broker_registers_its_topics_read_only_with_a_new_version(tmp_path):
    topics = TopicTable(MetadataFile(tmp_path / "topics.json"))
    topics.apply([TopicConfig("a", 2), TopicConfig("ro", 1, perm=2)], [], 1)
    registrar = BrokerRegistrar(BrokerIdentity("c1", "broker-b", 0, "10.1.1.1:10911"),
                                ["127.0.0.1:1"], topics, interval_s=3600)
    first = registrar._request()
    assert [t.perm for t in first.topics] == [6, 2]
    registrar.set_writable(False)
    full = registrar._request()
    assert [t.perm for t in full.topics] == [2, 2]
    assert full.data_version.counter == first.data_version.counter + 1   # routes rebuilt
    registrar.set_writable(False)   # no change, no new version
    assert registrar._request().data_version == full.data_version
    registrar.set_writable(True)
    again = registrar._request()
    assert [t.perm for t in again.topics] == [6, 2]
    assert again.data_version.counter == full.data_version.counter + 1
    registrar.stop(unregister=False)
