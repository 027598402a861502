"""Acks coalesced per broker: what one consumer acks while an Ack call is on the wire goes
in the next call, together (Kafka's producer batching, with no linger).

A consumer that acks message by message pays one round trip per message when it waits for
each answer: on loopback that is a gRPC unary call, about 0.6 ms of Python on each side
(docs/consumption.md, "Where a call spends its time"). Acks that are not waited for one by
one (`SimpleConsumer.ack_async`, acks from several threads) share calls instead: the first
ack of an idle broker leaves at once, and every ack made before its answer arrives leaves in
the one call that follows. Nothing is delayed on purpose, so a lone ack is as fast as before.

Each ack still gets its own answer, and an answer means what a single Ack's answer means:
the broker logged the ACK before it replied.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from tidemq.common import errors
from tidemq.common.receipt import MAX_ACK_BATCH, ack_error
from tidemq.v1 import broker_pb2

# start(handles) → a grpc future of the broker's AckResponse for them
StartAck = Callable[[list[str]], Any]


class AckLane:
    """The acks bound for one broker: at most one Ack call in flight, the rest queued."""

    def __init__(self, start: StartAck) -> None:
        self._start = start
        self._lock = threading.Lock()
        self._queued: list[tuple[str, Future]] = []
        self._in_flight = False

    def submit(self, handles: Sequence[str]) -> list[Future]:
        """One future per handle: None when acked (or acked before), else the error a single
        ack of it raises."""
        futures = [Future() for _ in handles]
        with self._lock:
            self._queued.extend(zip(handles, futures, strict=True))
            batch = self._take() if not self._in_flight else None
        if batch:
            self._send(batch)
        return futures

    def _take(self) -> list[tuple[str, Future]]:
        """The next call's acks (under the lock); marks a call in flight when there are any."""
        batch, self._queued = self._queued[:MAX_ACK_BATCH], self._queued[MAX_ACK_BATCH:]
        self._in_flight = bool(batch)
        return batch

    def _send(self, batch: list[tuple[str, Future]]) -> None:
        try:
            call = self._start([handle for handle, _ in batch])
        except Exception as exc:  # noqa: BLE001 - the channel refused the call: answer it
            self._answer(batch, None, errors.ServiceUnavailable(f"ack not sent: {exc}"))
            return
        call.add_done_callback(lambda done: self._answer(batch, done, _failure(done)))

    def _answer(self, batch: list[tuple[str, Future]], done: Any,
                failure: errors.TideMQError | None) -> None:
        """Settle one call's acks, then send what queued up meanwhile."""
        try:
            if failure is not None:  # nothing of this call was acked: say so for each
                for _, future in batch:
                    future.set_exception(failure)
            else:
                for (_, future), result in zip(batch, done.result().results, strict=True):
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


def _failure(call: Any) -> errors.TideMQError | None:
    """A finished grpc future's failure as the TideMQError a blocking call raises."""
    try:
        failure = call.exception()
    except Exception as exc:  # noqa: BLE001 - cancelled (the consumer closed)
        return errors.ServiceUnavailable(f"ack not sent: {type(exc).__name__}")
    if failure is None or isinstance(failure, errors.TideMQError):
        return failure
    return errors.from_rpc_error(failure)


class AckLanes:
    """One AckLane per broker address, for one consumer group."""

    def __init__(self, group: str, start_call: Callable[[str, str, Any], Any]) -> None:
        """`start_call(addr, method, request)` starts a broker call as a grpc future."""
        self._group, self._start_call = group, start_call
        self._lock = threading.Lock()
        self._lanes: dict[str, AckLane] = {}

    def submit(self, addr: str, handles: Sequence[str]) -> list[Future]:
        with self._lock:
            lane = self._lanes.get(addr)
            if lane is None:
                lane = self._lanes[addr] = AckLane(lambda batch, addr=addr: self._start_call(
                    addr, "Ack", broker_pb2.AckRequest(consumer_group=self._group,
                                                       receipt_handles=batch)))
        return lane.submit(handles)
