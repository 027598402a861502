"""TideMQ Python client: Producer, PullConsumer and the message model.

>>> from tidemq.client import Producer, PullConsumer, Message   # doctest: +SKIP
"""

from tidemq.client.consumer import PullConsumer
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
from tidemq.client.routes import NameServerClient, RouteCache, TopicRoute
from tidemq.client.selector import (
    MessageQueueSelector,
    SelectByFunction,
    SelectByHash,
    SelectRandom,
)

__all__ = [
    "LatencyFaultTolerance", "Message", "MessageExt", "MessageQueue", "MessageQueueSelector",
    "NameServerClient", "Producer", "PullConsumer", "PullResult", "PullStatus", "RouteCache",
    "SelectByFunction", "SelectByHash", "SelectRandom", "SendResult", "SendStatus", "TopicRoute",
]
