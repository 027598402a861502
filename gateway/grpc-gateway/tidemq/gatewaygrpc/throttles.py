"""Client quotas for RocketMQ clients (docs/quotas.md, "Clients of a gateway").

A RocketMQ client's broker calls are made on its behalf (tidemq.common.quotas.on_behalf_of):
its `x-mq-client-id` and, with auth on, the ACL user who signed its call. RocketMQ's protocol
has no throttle time to hand the client, so the gateway waits it out for that client alone:
a throttle time a broker answers one of its calls is kept here, and that client's next
SendMessage, ReceiveMessage or PullMessage waits until it has passed before going to the
brokers (the SDK's channel does the same for a whole process; here it is per end client, on
the thread serving that client's call, so no other client waits). A client sending many
calls at once is also held by the brokers themselves.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from tidemq.common.quotas import EndClient, current_caller, on_behalf_of
from tidemq.gatewaygrpc import metrics

CLIENT_ID_METADATA = "x-mq-client-id"   # what every RocketMQ 5 client sends with each call
MAX_TRACKED = 10_000                      # clients with a throttle time kept at once


class ClientThrottles:
    """Until when each end client (user, client id) waits, from its last throttle time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[tuple[str, str], float] = {}

    def remaining(self, key: tuple[str, str]) -> float:
        """Seconds the client still has to wait (0: none)."""
        return max(0.0, self._until.get(key, 0.0) - time.monotonic())

    def note(self, end: EndClient) -> None:
        if end.throttle_ms <= 0:
            return
        until = time.monotonic() + end.throttle_ms / 1000
        with self._lock:
            if len(self._until) >= MAX_TRACKED:   # drop the ones already over
                now = time.monotonic()
                self._until = {k: u for k, u in self._until.items() if u > now}
            self._until[end.key] = max(self._until.get(end.key, 0.0), until)

    @contextlib.contextmanager
    def calls_for(self, context) -> Iterator[EndClient]:
        """Broker calls for the RocketMQ client of this gRPC call: after its throttle time
        has passed, charged to it, and its new throttle time kept."""
        client_id = ""
        for key, value in context.invocation_metadata() or ():
            if key == CLIENT_ID_METADATA:
                client_id = value
                break
        with on_behalf_of(client_id, current_caller().user) as end:
            wait = self.remaining(end.key)
            if wait > 0:
                metrics.THROTTLE_WAITS.inc(wait)
                time.sleep(wait)  # the broker said how long; only this client's call waits
            try:
                yield end
            finally:
                self.note(end)
