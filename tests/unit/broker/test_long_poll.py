"""PullRequestHoldService: held pulls wake on arrival, time out, or end at shutdown."""

from __future__ import annotations

import asyncio
import threading

import pytest
from tidemq.broker.long_poll import PullRequestHoldService

from tests.support.processes import wait_until, wait_until_async


class Queue:
    def __init__(self) -> None:
        self.max_offset = 0


def hold(holds, topic, queue_id, offset, timeout_s, max_offset) -> bool:
    return asyncio.run(holds.hold(topic, queue_id, offset, timeout_s, max_offset))


def hold_in_thread(holds, queue, offset, timeout_s, topic="t", queue_id=0):
    """A held pull on an event loop of its own: woken across threads like the broker's."""
    result = []
    thread = threading.Thread(target=lambda: result.append(
        hold(holds, topic, queue_id, offset, timeout_s, lambda: queue.max_offset)))
    thread.start()
    return thread, result


def test_returns_at_once_when_the_queue_already_grew():
    queue = Queue()
    queue.max_offset = 5
    assert hold(PullRequestHoldService(), "t", 0, 4, 30, lambda: queue.max_offset)


def test_arrival_wakes_only_the_right_queue():
    holds, queue, other = PullRequestHoldService(), Queue(), Queue()
    thread, result = hold_in_thread(holds, queue, 0, 30)
    other_thread, other_result = hold_in_thread(holds, other, 0, 30, queue_id=1)
    wait_until(lambda: holds.held_count() == 2, 5, message="two held pulls")
    queue.max_offset = 1
    holds.notify_arrival("t", 0, 1)
    thread.join(10)
    assert result == [True]
    assert other_thread.is_alive()  # a different queue's arrival did not release it
    other.max_offset = 3
    holds.notify_arrival("t", 1, 3)
    other_thread.join(10)
    assert other_result == [True]
    assert holds.held_count() == 0


def test_spurious_notify_keeps_holding():
    holds, queue = PullRequestHoldService(), Queue()
    thread, result = hold_in_thread(holds, queue, 0, 30)
    wait_until(lambda: holds.held_count() == 1, 5, message="held pull")
    holds.notify_arrival("t", 0, 0)  # nothing new yet
    assert thread.is_alive() and result == []  # max offset unchanged: still held
    queue.max_offset = 1
    holds.notify_arrival("t", 0, 1)
    thread.join(10)
    assert result == [True]


def test_times_out_without_arrival():
    assert not hold(PullRequestHoldService(), "t", 0, 0, 0.05, lambda: 0)


def test_shutdown_releases_every_hold():
    holds, queue = PullRequestHoldService(), Queue()
    threads = [hold_in_thread(holds, queue, 0, 60, queue_id=i) for i in range(3)]
    wait_until(lambda: holds.held_count() == 3, 5, message="three held pulls")
    holds.shutdown()
    for thread, result in threads:
        thread.join(10)
        assert result == [False]
    assert not hold(holds, "t", 9, 0, 60, lambda: 0)  # no new hold after shutdown


def test_many_pulls_held_on_one_loop_without_a_thread_each():
    holds, queues = PullRequestHoldService(), [Queue() for _ in range(500)]

    threads_before = set(threading.enumerate())  # other tests' threads may end meanwhile

    async def scenario():
        held = [asyncio.ensure_future(holds.hold("t", n, 0, 30, lambda q=q: q.max_offset))
                for n, q in enumerate(queues)]
        await wait_until_async(lambda: holds.held_count() == len(held), 10,
                               message="every pull held")
        assert set(threading.enumerate()) <= threads_before  # no thread holds a pull
        for n, queue in enumerate(queues):
            queue.max_offset = 1
            holds.notify_arrival("t", n, 1)
        return await asyncio.gather(*held)

    assert asyncio.run(scenario()) == [True] * len(queues)
    assert holds.held_count() == 0


def test_a_cancelled_hold_unregisters():
    holds, queue = PullRequestHoldService(), Queue()

    async def scenario():
        task = asyncio.ensure_future(holds.hold("t", 0, 0, 30, lambda: queue.max_offset))
        await wait_until_async(lambda: holds.held_count() == 1, 10, message="the held pull")
        task.cancel()  # what grpc.aio does when the caller cancels or disconnects
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert holds.held_count() == 0


def test_a_hold_on_an_unconfirmed_record_ends_when_the_read_fence_moves():
    """SYNC_MASTER: the record arrived (written) but is not readable until confirmed. Its
    arrival must not end the hold with nothing; the fence moving must end it at once."""
    holds, queue = PullRequestHoldService(), Queue()
    written = Queue()
    result: list = []
    thread = threading.Thread(target=lambda: result.append(asyncio.run(holds.hold(
        "t", 0, 0, 30, lambda: queue.max_offset, lambda: written.max_offset))))
    thread.start()
    wait_until(lambda: holds.held_count() == 1, 5, message="held pull")
    written.max_offset = 1
    holds.notify_arrival("t", 0, 1)          # written, not confirmed: keeps holding
    wait_until(lambda: holds.held_count() == 1 and holds.fenced_count() == 1, 5,
               message="held again, as fenced")
    assert thread.is_alive() and not result
    queue.max_offset = 1
    holds.notify_visible()                   # confirmed: no arrival comes for it
    thread.join(5)
    assert result == [True]
    assert holds.held_count() == 0 and holds.fenced_count() == 0


def test_a_hold_with_nothing_written_is_not_woken_by_the_read_fence():
    holds, queue = PullRequestHoldService(), Queue()
    thread, result = hold_in_thread(holds, queue, 0, 30)
    wait_until(lambda: holds.held_count() == 1, 5, message="held pull")
    assert holds.fenced_count() == 0          # idle holds cost nothing per acknowledgement
    holds.notify_visible()
    assert holds.held_count() == 1 and not result
    queue.max_offset = 1
    holds.notify_arrival("t", 0, 1)
    thread.join(5)
    assert result == [True]
