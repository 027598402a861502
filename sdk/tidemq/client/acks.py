"""Acks coalesced per broker: what is acked while an Ack call to that broker is on the wire
goes in the next call, together (Kafka's producer batching, with no linger).

A consumer that acks message by message pays one round trip per message when it waits for
each answer: on loopback that is a gRPC unary call, about 0.6 ms of Python on each side
(docs/consumption.md, "Where a call spends its time"). Acks that are not waited for one by
one (`SimpleConsumer.ack_async`, acks from several threads, the gateways' many clients) share
calls instead: the first ack of an idle broker leaves at once, and every ack made before its
answer arrives leaves in the one call that follows. Nothing is delayed on purpose, so a lone
ack costs what it did: a caller that waits and finds the lane idle makes the call itself, on
its own thread, the cheapest way a blocking gRPC call is made.

Each ack still gets its own answer, and an answer means what a single Ack's answer means:
the broker logged the ACK before it replied.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from tidemq.common import errors
from tidemq.common.receipt import MAX_ACK_BATCH, ack_error
from tidemq.v1 import broker_pb2

Batch = list[tuple[str, Future]]


class AckLane:
    """The acks bound for one broker: at most one Ack call in flight, the rest queued.

    `call(handles)` makes the Ack call and returns the broker's AckResponse (raising a
    TideMQError); `start(handles)` starts it as a grpc future."""

    def __init__(self, call: Callable[[list[str]], Any],
                 start: Callable[[list[str]], Any]) -> None:
        self._call, self._start = call, start
        self._lock = threading.Lock()
        self._queued: Batch = []
        self._in_flight = False

    def submit(self, handles: Sequence[str], *, waiting: bool = False) -> list[Future]:
        """One future per handle: None when acked (or acked before), else the error a single
        ack of it raises. `waiting`: the caller blocks on the futures next, so when the lane
        is idle the call is made on its thread, and they are done on return."""
        futures = [Future() for _ in handles]
        with self._lock:
            self._queued.extend(zip(handles, futures, strict=True))
            batch = self._take() if not self._in_flight else None
        if batch and waiting:
            try:
                response, failure = self._call(_handles(batch)), None
            except errors.TideMQError as exc:
                response, failure = None, exc
            except Exception as exc:  # noqa: BLE001 - never leave the lane marked busy
                response, failure = None, errors.Internal(f"ack failed: {exc!r}")
            self._answer(batch, response, failure)
        elif batch:
            self._send(batch)
        return futures

    def _take(self) -> Batch:
        """The next call's acks (under the lock); marks a call in flight when there are any."""
        batch, self._queued = self._queued[:MAX_ACK_BATCH], self._queued[MAX_ACK_BATCH:]
        self._in_flight = bool(batch)
        return batch

    def _send(self, batch: Batch) -> None:
        try:
            call = self._start(_handles(batch))
        except Exception as exc:  # noqa: BLE001 - the channel refused the call: answer it
            self._answer(batch, None, errors.ServiceUnavailable(f"ack not sent: {exc}"))
            return
        call.add_done_callback(
            lambda done: self._answer(batch, *_outcome(done)))

    def _answer(self, batch: Batch, response: Any,
                failure: errors.TideMQError | None) -> None:
        """Settle one call's acks, then send what queued up meanwhile."""
        try:
            if failure is not None:  # nothing of this call was acked: say so for each
                for _, future in batch:
                    future.set_exception(failure)
            else:
                for (_, future), result in zip(batch, response.results, strict=True):
                    error = ack_error(result.code, result.message)
                    if error is None:
                        future.set_result(None)
                    else:
                        future.set_exception(error)
        finally:
            with self._lock:
                following = self._take()
            if following:
                self._send(following)


def _handles(batch: Batch) -> list[str]:
    return [handle for handle, _ in batch]


def _outcome(call: Any) -> tuple[Any, errors.TideMQError | None]:
    """A finished grpc future as (response, None) or (None, the TideMQError a blocking call
    raises)."""
    try:
        failure = call.exception()
    except Exception as exc:  # noqa: BLE001 - cancelled (the consumer closed)
        return None, errors.ServiceUnavailable(f"ack not sent: {type(exc).__name__}")
    if failure is None:
        return call.result(), None
    if isinstance(failure, errors.TideMQError):
        return None, failure
    return None, errors.from_rpc_error(failure)


class AckLanes:
    """One AckLane per (broker address, consumer group). `client(addr)` is the broker's
    DirectClient (its `call` and `start`)."""

    def __init__(self, client: Callable[[str], Any]) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._lanes: dict[tuple[str, str], AckLane] = {}

    def submit(self, addr: str, group: str, handles: Sequence[str], *,
               waiting: bool = False) -> list[Future]:
        key = (addr, group)
        with self._lock:
            lane = self._lanes.get(key)
            if lane is None:
                def request(batch: list[str]) -> broker_pb2.AckRequest:
                    return broker_pb2.AckRequest(consumer_group=group, receipt_handles=batch)

                client = self._client(addr)
                lane = self._lanes[key] = AckLane(
                    lambda batch: client.call("Ack", request(batch)),
                    lambda batch: client.start("Ack", request(batch)))
        return lane.submit(handles, waiting=waiting)

    def submit_routed(self, group: str, texts: Sequence[str],
                      locate: Callable[[str], tuple[str, str]],
                      addr_of: Callable[[str], str], *,
                      waiting: bool = False) -> list[Future]:
        """One future per text, in order. `locate(text)` → (broker group, the handle the
        broker knows), raising the TideMQError that fails that text alone; `addr_of(broker
        group)` → its master's address (an error fails all of that group's acks). The handles
        of each broker group go to its lane together."""
        futures: list[Future | None] = [None] * len(texts)
        by_broker, refused = _by_broker(texts, locate)
        for i, exc in refused:
            futures[i] = _failed(exc)
        for broker_name, entries in by_broker.items():
            try:
                addr = addr_of(broker_name)
            except errors.TideMQError as exc:  # no route: none of these was acked
                submitted = [_failed(exc) for _ in entries]
            else:
                submitted = self.submit(addr, group, [h for _, h in entries], waiting=waiting)
            for (i, _), future in zip(entries, submitted, strict=True):
                futures[i] = future
        return futures

    def ack_routed(self, group: str, texts: Sequence[str],
                   locate: Callable[[str], tuple[str, str]],
                   addr_of: Callable[[str], str]) -> list[errors.TideMQError | None]:
        """What `submit_routed(..., waiting=True)` answers, for a caller that holds a batch:
        None (acked) or the error per text, in order. A batch is one already, so it skips the
        lanes: each broker group's handles go in calls of their own (MAX_ACK_BATCH each), all
        started before any is waited for, and no future is made per handle."""
        outcomes: list[errors.TideMQError | None] = [None] * len(texts)
        by_broker, refused = _by_broker(texts, locate)
        for i, exc in refused:
            outcomes[i] = exc
        calls = []
        for broker_name, entries in by_broker.items():
            for start in range(0, len(entries), MAX_ACK_BATCH):
                part = entries[start:start + MAX_ACK_BATCH]
                try:
                    call = self._client(addr_of(broker_name)).start(
                        "Ack", broker_pb2.AckRequest(consumer_group=group,
                                                     receipt_handles=[h for _, h in part]))
                except errors.TideMQError as exc:  # no route: none of these was acked
                    for i, _ in part:
                        outcomes[i] = exc
                    continue
                calls.append((part, call))
        for part, call in calls:
            response, failure = _outcome(call)
            if failure is not None:
                for i, _ in part:
                    outcomes[i] = failure
                continue
            for (i, _), result in zip(part, response.results, strict=True):
                if result.code:
                    outcomes[i] = ack_error(result.code, result.message)
        return outcomes


def _by_broker(texts: Sequence, locate: Callable[[Any], tuple[str, str]],
               ) -> tuple[dict[str, list[tuple[int, str]]],
                          list[tuple[int, errors.TideMQError]]]:
    """Each broker group's (index, handle) pairs, in order, and the texts `locate` refused."""
    by_broker: dict[str, list[tuple[int, str]]] = defaultdict(list)
    refused = []
    for i, text in enumerate(texts):
        try:
            broker_name, handle = locate(text)
        except errors.TideMQError as exc:
            refused.append((i, exc))
            continue
        by_broker[broker_name].append((i, handle))
    return by_broker, refused


def _failed(error: Exception) -> Future:
    """A future that already failed with `error`."""
    future: Future = Future()
    future.set_exception(error)
    return future
