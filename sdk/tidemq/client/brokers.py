"""One broker channel per broker address, shared by producers and consumers of a process."""

from __future__ import annotations

import os
import socket

from tidemq.common.channel import BrokerChannels
from tidemq.common.rpc import BreakerSettings


def default_client_id() -> str:
    """The client id a client sends when it is given none: `<host>@<pid>` (quotas for the
    client default then apply per process)."""
    return f"{socket.gethostname()}@{os.getpid()}"


class BrokerClients(BrokerChannels):
    """Channels with a circuit breaker per broker and one retry of an idempotent call.
    `client_id`: sent with every call, the entity client quotas are charged to (Kafka's
    client.id, docs/quotas.md)."""

    def __init__(self, *, timeout: float = 3.0, breaker: BreakerSettings | None = None,
                 client_id: str = "") -> None:
        super().__init__(timeout=timeout, breaker=breaker, retries=1,
                         client_id=client_id or default_client_id())
