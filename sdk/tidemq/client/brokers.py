"""One broker channel per broker address, shared by producers and consumers of a process."""

from __future__ import annotations

from tidemq.common.channel import BrokerChannels
from tidemq.common.rpc import BreakerSettings


class BrokerClients(BrokerChannels):
    """Channels with a circuit breaker per broker and one retry of an idempotent call."""

    def __init__(self, *, timeout: float = 3.0, breaker: BreakerSettings | None = None) -> None:
        super().__init__(timeout=timeout, breaker=breaker, retries=1)
