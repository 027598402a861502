"""The broker metrics the dashboards and alerts need, over a real MessageStore: messages
consumed per pull answer, refused sends by code, consumer lag per group (master only) and the
disk use of the data dir's file system."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from tidemq.broker import metrics
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.store import MetadataFile
from tidemq.broker.topic_table import TopicConfig
from tidemq.common import record
from tidemq.common.errors import PreconditionFailed, TopicNotExist

from tests.support.local_broker import LocalBroker


@pytest.fixture
def broker(tmp_path):
    local = LocalBroker(tmp_path, [TopicConfig("dash", 2), TopicConfig("ro", 1, perm=2)])
    yield local.messaging, ConsumerOffsetManager(MetadataFile(tmp_path / "offsets.json"))
    local.close()


def _batch(topic: str, n: int) -> bytes:
    return b"".join(record.encode_message(record.OutgoingMessage(topic, b"m%d" % i))[0]
                    for i in range(n))


def _sample(family, **labels) -> float:
    return next(s.value for s in family.samples if s.labels == labels)


def test_consumed_messages_are_counted_per_pull_answer(broker):
    messaging, _ = broker
    before = metrics.MESSAGES_OUT.labels("dash")._value.get()
    asyncio.run(messaging.send("dash", 0, _batch("dash", 5), 5))
    assert messaging.store.wait_dispatched(5)
    asyncio.run(messaging.pull("dash", 0, 0, 3, 0, 0, ""))
    asyncio.run(messaging.pull("dash", 0, 3, 32, 0, 0, ""))
    asyncio.run(messaging.pull("dash", 0, 5, 32, 0, 0, ""))  # nothing new: not counted
    assert metrics.MESSAGES_OUT.labels("dash")._value.get() - before == 5


def test_refused_sends_are_counted_by_code(broker):
    messaging, _ = broker
    refused = metrics.SEND_ERRORS.labels
    before = {code: refused(code)._value.get() for code in ("NO_PERMISSION", "TOPIC_NOT_EXIST")}
    with pytest.raises(PreconditionFailed):
        asyncio.run(messaging.send("ro", 0, _batch("ro", 1), 1))
    with pytest.raises(TopicNotExist):
        asyncio.run(messaging.send("missing", 0, _batch("missing", 1), 1))
    asyncio.run(messaging.send("dash", 1, _batch("dash", 1), 1))  # accepted: not counted
    assert {code: refused(code)._value.get() - before[code] for code in before} == {
        "NO_PERMISSION": 1, "TOPIC_NOT_EXIST": 1}


def test_consumer_lag_is_stored_minus_committed_on_the_master_only(broker):
    messaging, offsets = broker
    asyncio.run(messaging.send("dash", 0, _batch("dash", 7), 7))
    asyncio.run(messaging.send("dash", 1, _batch("dash", 4), 4))
    assert messaging.store.wait_dispatched(5)
    offsets.commit("billing", [("dash", 0, 2), ("dash", 1, 4)])
    offsets.commit("audit", [("dash", 0, 9)])  # ahead of the queue (reset): counts as 0
    master = [True]
    collector = metrics.ConsumerLagCollector(offsets, messaging.store, lambda: master[0])
    (family,) = collector.collect()
    assert _sample(family, group="billing", topic="dash") == 5
    assert _sample(family, group="audit", topic="dash") == 0
    master[0] = False
    (family,) = collector.collect()
    assert family.name == "tidemq_broker_consumer_lag_messages" and family.samples == []


def test_a_pop_groups_lag_is_what_it_has_not_popped_plus_what_it_has_not_acked(broker):
    messaging, offsets = broker
    asyncio.run(messaging.send("dash", 0, _batch("dash", 10), 10))
    assert messaging.store.wait_dispatched(5)
    offsets.commit("puller", [("dash", 0, 6)])
    pops = {("popper", "dash", 0): (7, 2)}  # 7 handed out, 2 of them not acked yet
    collector = metrics.ConsumerLagCollector(offsets, messaging.store, lambda: True,
                                             lambda: pops)
    (family,) = collector.collect()
    assert _sample(family, group="puller", topic="dash") == 4
    assert _sample(family, group="popper", topic="dash") == 3 + 2


def test_disk_use_is_that_of_the_data_dirs_file_system(tmp_path):
    ratio, free = metrics.DiskCollector(tmp_path / "not-yet-created").collect()
    usage = shutil.disk_usage(tmp_path)
    assert 0 < ratio.samples[0].value <= 1
    # df's Use%: used over what the broker may use (used + f_bavail), not over the size
    assert abs(ratio.samples[0].value - usage.used / (usage.used + usage.free)) < 0.05
    assert free.name == "tidemq_broker_disk_free_bytes" and free.samples[0].value > 0
