"""The RocketMQ clients connected to this gateway through their Telemetry streams.

Each client keeps one Telemetry stream open; its Settings name the topics a producer
publishes (or a consumer's group). A broker's transaction check-back reaches the gateway's
producer group, not the client that sent the half message, so it is forwarded to a connected
producer publishing the message's topic (round robin, like the proxy picking a channel of the
producer group), through that client's outbox. No gRPC here: the servicer drains outboxes.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from tidemq.client import MessageExt


@dataclass(frozen=True, slots=True)
class OrphanedTransaction:
    """A half message whose producer must say how its transaction ended."""

    topic: str
    message: MessageExt
    transaction_id: str


@dataclass(eq=False)
class ClientSession:
    client_id: str
    publishing: frozenset[str] = frozenset()
    group: str = ""
    outbox: queue.Queue = field(default_factory=queue.Queue)


class ClientSessions:
    def __init__(self) -> None:
        self._sessions: set[ClientSession] = set()
        self._lock = threading.Lock()
        self._turn = itertools.count()

    def open(self, client_id: str) -> ClientSession:
        session = ClientSession(client_id)
        with self._lock:
            self._sessions.add(session)
        return session

    def update(self, session: ClientSession, *, publishing: Iterable[str] = (),
               group: str = "") -> frozenset[str]:
        """Record the client's settings; the topics it publishes that are new to it."""
        topics = frozenset(publishing)
        with self._lock:
            new = topics - session.publishing
            session.publishing, session.group = topics, group
        return new

    def close(self, session: ClientSession) -> None:
        with self._lock:
            self._sessions.discard(session)

    def count(self) -> int:
        with self._lock:
            return len(self._sessions)

    def forward_check(self, topic: str, message: MessageExt, transaction_id: str) -> bool:
        """Hand a check-back to one producer of `topic`; False if none is connected (the
        broker checks again after its interval)."""
        with self._lock:
            producers = sorted((s for s in self._sessions if topic in s.publishing),
                               key=lambda s: s.client_id)
        if not producers:
            return False
        chosen = producers[next(self._turn) % len(producers)]
        chosen.outbox.put(OrphanedTransaction(topic, message, transaction_id))
        return True
