"""OffsetCopier against a real broker: a slave's consumer-offset table becomes a copy of its
master's (commits, their metadata strings and resets alike), and a master change mid-call never lands a stale copy."""

from __future__ import annotations

from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.replication.offset_copy import OffsetCopier
from tidemq.broker.store import MetadataFile
from tidemq.client import PullConsumer
from tidemq.client.message import MessageQueue

from tests.support.cluster import (
    create_topic_in_config_center,
    running_cluster,
    wait_for_route,
)


def test_slave_table_becomes_a_copy_of_the_masters(tmp_path):
    with running_cluster(tmp_path, broker_names=("broker-a",)) as cluster:
        create_topic_in_config_center(cluster, "orders", 2)
        wait_for_route(cluster, "orders", 1)
        master = cluster.brokers["broker-a"].addr
        consumer = PullConsumer(cluster.namesrv_addrs, consumer_group="billing")
        consumer.commit(MessageQueue("orders", "broker-a", 0), 11)
        consumer.commit(MessageQueue("orders", "broker-a", 1), 4, metadata="ck\u00e9-7")

        local = ConsumerOffsetManager(MetadataFile(tmp_path / "copy.json"))
        local.commit("gone-on-master", [("orders", 0, 99)])
        target = {"addr": master}
        copier = OffsetCopier(local, lambda: target["addr"], interval_s=3600)
        assert copier.copy_once()
        copied = local.snapshot()  # system groups (the timer's progress) are copied too
        assert copied["billing"] == [("orders", 0, 11), ("orders", 1, 4)]
        assert "gone-on-master" not in copied
        # a commit's metadata string travels with it (Kafka's OffsetCommit metadata)
        assert local.metadata("billing") == {("orders", 1): "ck\u00e9-7"}
        assert local.persist()  # a copy is persisted like a commit

        consumer.commit(MessageQueue("orders", "broker-a", 0), 3)  # a reset backwards
        assert copier.copy_once()
        assert local.query("billing", "orders")[0] == ("orders", 0, 3)
        consumer.commit(MessageQueue("orders", "broker-a", 1), 5)   # no metadata: none kept
        assert copier.copy_once()
        assert local.metadata("billing") == {}

        target["addr"] = ""  # this replica became master: it copies nothing
        assert not copier.copy_once()
        assert local.query("billing", "orders")[0] == ("orders", 0, 3)
