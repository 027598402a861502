"""The broker's own topics (retry, dead letters, timer, transactions, pop), defined in the
config center on first use. Their names are tidemq.common.system_topics; this is the one
place a broker module asks for one, so retries, the timer, transactions and pop depend on it
and not on each other."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from tidemq.broker.messaging import Messaging
from tidemq.broker.topic_table import TopicConfig
from tidemq.common import errors
from tidemq.common.polling import poll


class SystemTopics:
    """Define a system topic in the config center on first use and wait until this broker
    serves it (its TopicManager applies the definition like any other)."""

    def __init__(self, messaging: Messaging, define: Callable[[str, int], None], *,
                 wait_s: float = 5.0) -> None:
        self.messaging = messaging
        self.define = define  # (name, queues): a compare-and-set create; an existing one is fine
        self.wait_s = wait_s

    def ensure(self, name: str, queues: int) -> TopicConfig:
        topic = self.messaging.topics.get(name)
        if topic is not None:
            return topic
        with contextlib.suppress(errors.AlreadyExists):  # another broker defined it first
            self.define(name, queues)
        topic = poll(lambda: self.messaging.topics.get(name), self.wait_s)
        if topic is None:
            raise errors.ServiceUnavailable(
                f"system topic {name!r} was defined but this broker does not serve it yet; "
                "retry shortly", code="SYSTEM_TOPIC_NOT_READY")
        return topic
