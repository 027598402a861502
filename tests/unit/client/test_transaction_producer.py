"""TransactionProducer checks that need no broker: a delayed message is refused before any
call, and a check-back's half message is shown with its real topic and queue."""

from __future__ import annotations

import pytest
from tidemq.client import Message, TransactionProducer
from tidemq.client.transaction import checked_message
from tidemq.common import errors, record


@pytest.mark.parametrize("message", [Message("t", b"x", delay_level=3),
                                     Message("t", b"x", deliver_at_ms=5)])
def test_a_transactional_message_cannot_be_delayed(message):
    with TransactionProducer("127.0.0.1:1", producer_group="g") as producer, \
            pytest.raises(errors.InvalidArgument) as refused:
        producer.prepare(message)
    assert refused.value.code == "TRANSACTION_WITH_DELAY"


def test_a_check_back_shows_the_real_topic_and_queue():
    sent = record.encode("orders", b"body", properties=record.encode_properties(
        {record.PROP_KEYS: "o-1", record.PROP_UNIQ_KEY: "U1"}))
    half = record.retarget(sent, "RMQ_SYS_TRANS_HALF_TOPIC",
                           transaction_type=record.TRANSACTION_PREPARED_TYPE,
                           set_properties={record.PROP_REAL_TOPIC: "orders",
                                           record.PROP_REAL_QUEUE_ID: "3"})
    message = checked_message(half, "broker-a")
    assert (message.topic, message.queue_id, message.body) == ("orders", 3, b"body")
    assert (message.keys, message.unique_id, message.user_properties) == (["o-1"], "U1", {})


def test_a_producer_group_is_required():
    with pytest.raises(errors.InvalidArgument):
        TransactionProducer("127.0.0.1:1", producer_group="")


def test_close_copes_with_a_traced_check_stream():
    """With gRPC client instrumentation (every service traces) a server stream is a plain
    generator, without `cancel`: closing must not fail on it (gateway-grpc shutdown did)."""
    producer = TransactionProducer("127.0.0.1:1", producer_group="g")
    producer._calls["broker-a"] = (check for check in ())
    producer.close()
