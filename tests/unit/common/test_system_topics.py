"""Which topic names are the brokers' own: readers of "every topic" leave exactly these out."""

from __future__ import annotations

import pytest
from tidemq.common.system_topics import dlq_topic, is_system_topic, retry_topic


@pytest.mark.parametrize("name", [
    retry_topic("billing"), dlq_topic("billing"), "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "rmq_sys_REVIVE_LOG_TestCluster",
])
def test_the_brokers_own_topics_are_system_topics(name):
    assert is_system_topic(name)


@pytest.mark.parametrize("name", ["orders", "RETRY_orders", "orders%RETRY%", "SCHEDULE_TOPIC",
                                  "rmq_sys", "DLQ"])
def test_user_topics_are_not(name):
    assert not is_system_topic(name)
