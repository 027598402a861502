"""TideMQ Python client: Producer, TransactionProducer, PullConsumer, PushConsumer and the
message model.

>>> from tidemq.client import Producer, PushConsumer, Message   # doctest: +SKIP

The names below are loaded on first use (PEP 562 `__getattr__`), not when the package is: the
`tidemq` command lives in this package (tidemq.client.cli) and most of its subcommands need no
producer or consumer, whose imports (gRPC, pybreaker and so redis-py, protobuf stubs, structlog)
cost about 1.3 s of CPU per process. `from tidemq.client import Producer` works as before.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and the import-graph test see; _SOURCES loads them
    from tidemq.client.consumer import PullConsumer
    from tidemq.client.dead_letters import DeadLetters
    from tidemq.client.fault import LatencyFaultTolerance
    from tidemq.client.message import (
        Message,
        MessageExt,
        MessageQueue,
        ProducerSequence,
        PullResult,
        PullStatus,
        SendManyError,
        SendResult,
        SendStatus,
    )
    from tidemq.client.producer import Producer
    from tidemq.client.push_consumer import (
        ConsumeFrom,
        ConsumeStatus,
        MessageModel,
        PushConsumer,
    )
    from tidemq.client.routes import NameServerClient, RouteCache, TopicRoute
    from tidemq.client.selector import (
        MessageQueueSelector,
        SelectByFunction,
        SelectByHash,
        SelectRandom,
    )
    from tidemq.client.simple_consumer import (
        AckResult,
        ReceivedBatch,
        ReceivedMessage,
        SimpleConsumer,
    )
    from tidemq.client.transaction import (
        TransactionEnd,
        TransactionProducer,
        TransactionResolution,
        TransactionSendResult,
    )

# name -> the module that defines it (tests/unit/client/test_lazy_imports.py holds this, the
# TYPE_CHECKING imports above and __all__ together)
_SOURCES = {
    "PullConsumer": "consumer",
    "DeadLetters": "dead_letters",
    "LatencyFaultTolerance": "fault",
    **dict.fromkeys(["Message", "MessageExt", "MessageQueue", "ProducerSequence", "PullResult",
                     "PullStatus", "SendManyError", "SendResult", "SendStatus"], "message"),
    "Producer": "producer",
    **dict.fromkeys(["ConsumeFrom", "ConsumeStatus", "MessageModel", "PushConsumer"],
                    "push_consumer"),
    **dict.fromkeys(["NameServerClient", "RouteCache", "TopicRoute"], "routes"),
    **dict.fromkeys(["MessageQueueSelector", "SelectByFunction", "SelectByHash", "SelectRandom"],
                    "selector"),
    **dict.fromkeys(["AckResult", "ReceivedBatch", "ReceivedMessage", "SimpleConsumer"],
                    "simple_consumer"),
    **dict.fromkeys(["TransactionEnd", "TransactionProducer", "TransactionResolution",
                     "TransactionSendResult"], "transaction"),
}

__all__ = [
    "AckResult", "ConsumeFrom", "ConsumeStatus", "DeadLetters", "MessageModel", "PushConsumer",
    "LatencyFaultTolerance", "Message", "MessageExt", "MessageQueue", "MessageQueueSelector",
    "NameServerClient", "Producer", "ProducerSequence", "PullConsumer", "PullResult", "PullStatus", "RouteCache",
    "ReceivedBatch", "ReceivedMessage", "SelectByFunction", "SelectByHash", "SelectRandom", "SendManyError",
    "SendResult",
    "SendStatus", "SimpleConsumer", "TopicRoute", "TransactionEnd", "TransactionProducer",
    "TransactionResolution", "TransactionSendResult",
]


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
