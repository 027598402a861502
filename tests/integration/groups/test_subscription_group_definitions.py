"""Subscription-group definitions from the config center, enforced live by a real broker:
disabled → pulls, commits and joins refused with SUBSCRIPTION_GROUP_NOT_CONSUMABLE; enabled
again → pulls succeed with no restart; an invalid definition is refused and logged and the
previous one stays in force. Real redis, config-center, name servers and broker processes."""

from __future__ import annotations

import json

import pytest
from tidemq.client import Message, Producer, PullConsumer
from tidemq.client.group import DirectClient
from tidemq.common.errors import PreconditionFailed
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.groups import SubscriptionGroups
from tidemq.v1 import broker_pb2

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

TOPIC = "GroupDefTopic"
NOT_CONSUMABLE = "SUBSCRIPTION_GROUP_NOT_CONSUMABLE"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("groupdefs"),
                         broker_names=("broker-a",)) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 1)
        wait_for_route(cluster, TOPIC, 1)
        with Producer(cluster.namesrv_addrs) as producer:
            producer.send(Message(TOPIC, b"hello"))
        yield cluster


@pytest.fixture
def broker(cluster) -> DirectClient:
    return DirectClient(cluster.brokers["broker-a"].addr, timeout=5)


@pytest.fixture
def groups(cluster):
    with ConfigClient(cluster.config_center.addr) as config:
        yield SubscriptionGroups(config)


def pull(broker: DirectClient, group: str, *, broadcasting: bool = False):
    return broker.call("Pull", broker_pb2.PullRequest(
        consumer_group=group, topic=TOPIC, queue_id=0, queue_offset=0, max_messages=8,
        broadcasting=broadcasting))


def commit(broker: DirectClient, group: str) -> None:
    broker.call("CommitOffsets", broker_pb2.CommitOffsetsRequest(
        consumer_group=group, generation_id=-1,
        offsets=[broker_pb2.QueueOffset(topic=TOPIC, queue_id=0, offset=1)]))


def in_force(broker: DirectClient, group: str) -> broker_pb2.SubscriptionGroup:
    reply = broker.call("GetSubscriptionGroups",
                        broker_pb2.GetSubscriptionGroupsRequest(groups=[group]))
    return reply.groups[0]


def applied(broker: DirectClient, revision: int) -> bool:
    return broker.call("GetSubscriptionGroups",
                       broker_pb2.GetSubscriptionGroupsRequest()).revision >= revision


def refused_code(call) -> str | None:
    try:
        call()
    except PreconditionFailed as exc:
        return exc.code
    return None


def test_disabled_group_refused_then_enabled_live(cluster, broker, groups):
    pid = cluster.brokers["broker-a"].pid
    assert pull(broker, "billing").record_count == 1  # undefined: auto-created with defaults

    created = groups.create("billing", consume_enable=False, retry_max_times=3)
    wait_until(lambda: applied(broker, created.revision), 15, message="the definition")
    with pytest.raises(PreconditionFailed) as err:
        pull(broker, "billing")
    assert err.value.code == NOT_CONSUMABLE
    assert "consume_enable is false in /tidemq/groups/billing" in err.value.message
    assert refused_code(lambda: commit(broker, "billing")) == NOT_CONSUMABLE
    assert refused_code(lambda: broker.call("JoinGroup", broker_pb2.JoinGroupRequest(
        group_id="billing", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        protocols=[broker_pb2.GroupProtocol(name="averagely", metadata=b"{}")]))) \
        == NOT_CONSUMABLE
    described = in_force(broker, "billing")
    assert (described.defined, described.retry_max_times, described.retry_queue_nums) == \
        (True, 3, 1)
    assert pull(broker, "someone-else").record_count == 1  # other groups are untouched

    enabled = groups.update("billing", {"consume_enable": True}, if_revision=created.revision)
    wait_until(lambda: applied(broker, enabled.revision), 15, message="the update")
    assert pull(broker, "billing").record_count == 1
    commit(broker, "billing")
    assert cluster.brokers["broker-a"].pid == pid  # live: no restart


def test_invalid_definition_is_refused_and_logged_and_the_last_good_one_stays(
        cluster, broker, groups):
    good = groups.create("ledger", consume_enable=False, retry_max_times=5)
    wait_until(lambda: applied(broker, good.revision), 15, message="the good definition")

    bad = groups.config.put("/tidemq/groups/ledger",
                            json.dumps({"consume_enable": "yes", "retry_max_times": 7}).encode())
    wait_until(lambda: applied(broker, bad.revision), 15, message="the bad definition's revision")
    log = cluster.brokers["broker-a"].log
    wait_until(lambda: "refused subscription group definition" in log.read_text()
               and "/tidemq/groups/ledger" in log.read_text(), 10, message="the refusal log")
    line = next(line for line in log.read_text().splitlines()
                if "refused subscription group definition" in line and "ledger" in line)
    assert "consume_enable must be true or false, got 'yes'" in line
    assert refused_code(lambda: pull(broker, "ledger")) == NOT_CONSUMABLE  # still disabled
    assert in_force(broker, "ledger").retry_max_times == 5

    groups.config.put("/tidemq/groups/ledger", json.dumps({"nonsense": 1}).encode())
    fixed = groups.config.put("/tidemq/groups/ledger", json.dumps({"retry_max_times": 7}).encode())
    wait_until(lambda: applied(broker, fixed.revision), 15, message="the fixed definition")
    assert pull(broker, "ledger").record_count == 1
    assert in_force(broker, "ledger").retry_max_times == 7


def test_broadcasting_refused_when_disallowed_and_delete_restores_defaults(
        cluster, broker, groups):
    created = groups.create("audit", consume_broadcast_enable=False)
    wait_until(lambda: applied(broker, created.revision), 15, message="the definition")
    assert pull(broker, "audit").record_count == 1  # clustering consumption is allowed
    assert refused_code(lambda: pull(broker, "audit", broadcasting=True)) == \
        "SUBSCRIPTION_GROUP_BROADCAST_DISABLED"

    groups.delete("audit")
    wait_until(lambda: not in_force(broker, "audit").defined, 15, message="the deletion")
    assert pull(broker, "audit", broadcasting=True).record_count == 1


def test_the_client_says_when_it_consumes_by_broadcasting(cluster, broker, groups):
    created = groups.create("replicas", consume_broadcast_enable=False)
    wait_until(lambda: applied(broker, created.revision), 15, message="the definition")
    consumer = PullConsumer(cluster.namesrv_addrs, consumer_group="replicas")
    try:
        mq = consumer.fetch_queues(TOPIC)[0]
        assert len(consumer.pull(mq, 0).messages) == 1
        with pytest.raises(PreconditionFailed) as err:
            consumer.pull(mq, 0, broadcasting=True)
        assert err.value.code == "SUBSCRIPTION_GROUP_BROADCAST_DISABLED"
    finally:
        consumer.close()
