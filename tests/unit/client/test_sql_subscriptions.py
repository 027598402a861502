"""The SDK checks a SQL92 subscription before anything goes on the wire: a bad filter or an
unknown expression type fails at the call with INVALID_FILTER (no broker needed)."""

from __future__ import annotations

import pytest
from tidemq.client import MessageQueue, PullConsumer, SimpleConsumer
from tidemq.client.push_consumer import ConsumeStatus, PushConsumer
from tidemq.common.errors import InvalidArgument

NOWHERE = "127.0.0.1:1"   # never dialled: the check comes first


def refused(call) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as caught:
        call()
    assert caught.value.code == "INVALID_FILTER"
    return caught.value


def test_pull_checks_the_filter_first():
    with PullConsumer(NOWHERE, consumer_group="g") as consumer:
        mq = MessageQueue("orders", "broker-a", 0)
        error = refused(lambda: consumer.pull(mq, 0, tag_expression="amount >",
                                              expression_type="SQL92"))
        assert "position 8" in str(error)
        refused(lambda: consumer.pull(mq, 0, tag_expression="a", expression_type="XPATH"))


def test_simple_and_push_consumers_check_their_subscription_when_built():
    refused(lambda: SimpleConsumer(NOWHERE, "g", "orders", tag_expression="a = ",
                                   expression_type="SQL92"))
    refused(lambda: PushConsumer(NOWHERE, "g", {"orders": "a BETWEEN 3 AND 1"},
                                 lambda messages: ConsumeStatus.CONSUME_SUCCESS,
                                 expression_type="SQL92"))
    # "*" is a tag expression, not SQL: a SQL92 subscription must say what it wants
    refused(lambda: PushConsumer(NOWHERE, "g", "orders",
                                 lambda messages: ConsumeStatus.CONSUME_SUCCESS,
                                 expression_type="SQL92"))


def test_a_valid_sql_subscription_is_accepted_and_the_retry_topic_stays_a_tag_read():
    consumer = PushConsumer(NOWHERE, "g", {"orders": "amount > 5"},   # never started
                            lambda messages: ConsumeStatus.CONSUME_SUCCESS,
                            expression_type="sql92")
    assert consumer.expression_types == {"orders": "SQL92"}
    assert "%RETRY%g" in consumer.subscription
    assert consumer.expression_types.get("%RETRY%g", "TAG") == "TAG"
