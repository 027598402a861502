"""TideMQ Python client: Producer, TransactionProducer, PullConsumer, PushConsumer and the
message model.

>>> from tidemq.client import Producer, PushConsumer, Message   # doctest: +SKIP
"""

from tidemq.client.consumer import PullConsumer
from tidemq.client.dead_letters import DeadLetters
from tidemq.client.fault import LatencyFaultTolerance
from tidemq.client.message import (
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from tidemq.client.producer import Producer
from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, MessageModel, PushConsumer
from tidemq.client.routes import NameServerClient, RouteCache, TopicRoute
from tidemq.client.selector import (
    MessageQueueSelector,
    SelectByFunction,
    SelectByHash,
    SelectRandom,
)
from tidemq.client.simple_consumer import AckResult, ReceivedMessage, SimpleConsumer
from tidemq.client.transaction import (
    TransactionEnd,
    TransactionProducer,
    TransactionResolution,
    TransactionSendResult,
)

__all__ = [
    "AckResult", "ConsumeFrom", "ConsumeStatus", "DeadLetters", "MessageModel", "PushConsumer",
    "LatencyFaultTolerance", "Message", "MessageExt", "MessageQueue", "MessageQueueSelector",
    "NameServerClient", "Producer", "PullConsumer", "PullResult", "PullStatus", "RouteCache",
    "ReceivedMessage", "SelectByFunction", "SelectByHash", "SelectRandom", "SendResult",
    "SendStatus", "SimpleConsumer", "TopicRoute", "TransactionEnd", "TransactionProducer",
    "TransactionResolution", "TransactionSendResult",
]
