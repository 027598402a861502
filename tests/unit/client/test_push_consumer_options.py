"""PushConsumer configuration errors surface at construction, with their precise codes, and
broadcasting offsets are stored atomically in a local file."""

from __future__ import annotations

import json

import pytest
from tidemq.client.brokers import default_client_id
from tidemq.client.message import MessageQueue
from tidemq.client.push_consumer import ConsumeStatus, MessageModel, PushConsumer
from tidemq.common.errors import InvalidArgument


def listener(messages):
    return ConsumeStatus.CONSUME_SUCCESS


def test_unknown_assignment_strategy_is_rejected_up_front():
    with pytest.raises(InvalidArgument) as raised:
        PushConsumer("127.0.0.1:1", "g", "t", listener, strategy="random")
    assert raised.value.code == "UNKNOWN_ASSIGNOR"


@pytest.mark.parametrize("kwargs", [{"concurrency": 0}, {"pull_batch_size": 0},
                                    {"consume_batch_size": -1}])
def test_non_positive_sizes_are_rejected(kwargs):
    with pytest.raises(InvalidArgument):
        PushConsumer("127.0.0.1:1", "g", "t", listener, **kwargs)


def test_empty_subscription_is_rejected():
    with pytest.raises(InvalidArgument):
        PushConsumer("127.0.0.1:1", "g", {}, listener)


def test_broadcasting_offsets_round_trip_through_the_local_file(tmp_path):
    consumer = PushConsumer("127.0.0.1:1", "g", "t", listener,
                            model=MessageModel.BROADCASTING, offset_store_dir=tmp_path)
    mq = MessageQueue("t", "broker-a", 3)
    consumer._store_local_offsets({mq: 42})
    consumer._store_local_offsets({MessageQueue("t", "broker-b", 0): 7})
    assert json.loads((tmp_path / "g.json").read_text()) == {"t|broker-a|3": 42,
                                                             "t|broker-b|0": 7}
    assert consumer._load_local_offsets()["t|broker-a|3"] == 42
    assert not list(tmp_path.glob("*.tmp"))  # the temp file was renamed over, not left behind
    (tmp_path / "g.json").write_text("{not json")
    assert consumer._load_local_offsets() == {}  # unreadable file: start per consume_from
    consumer._pool.shutdown()


def test_its_pulls_carry_a_client_id_for_quotas():
    """Client quotas charge the client id every call carries (docs/quotas.md): the consumer's
    own pool of channels (long polls, no breaker) carries the given one, else <host>@<pid>."""
    named = PushConsumer("127.0.0.1:1", "g", "t", listener, client_id="orders-reader")
    unnamed = PushConsumer("127.0.0.1:1", "g", "t", listener)
    assert named.puller.brokers.get("127.0.0.1:2").client_id == "orders-reader"
    assert unnamed.puller.brokers.get("127.0.0.1:2").client_id == default_client_id()
