"""ProcessQueue: the commit point never passes an unconsumed message (hypothesis), and flow
control pauses above the limits and resumes when consumption frees space."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st
from tidemq.client.message import MessageExt, MessageQueue
from tidemq.client.process_queue import ProcessQueue

MQ = MessageQueue("t", "broker-a", 0)


def message(offset: int, size: int = 10) -> MessageExt:
    return MessageExt(topic="t", body=b"x" * size, tags="", keys=[], properties={},
                      broker_name="broker-a", queue_id=0, queue_offset=offset, msg_id="",
                      unique_id="", born_timestamp=0, store_timestamp=0, reconsume_times=0)


@given(st.integers(1, 60), st.data())
def test_commit_offset_is_the_lowest_unconsumed(count, data):
    pq = ProcessQueue(MQ, 100)
    pq.add([message(100 + i) for i in range(count)], 100 + count)
    done = data.draw(st.sets(st.integers(100, 100 + count - 1)))
    pq.done(done)
    remaining = set(range(100, 100 + count)) - done
    assert pq.commit_offset() == (min(remaining) if remaining else 100 + count)
    assert pq.pending() == (len(remaining), 10 * len(remaining))


def test_duplicate_pull_results_are_counted_once():
    pq = ProcessQueue(MQ, 0)
    pq.add([message(0), message(1)], 2)
    pq.add([message(1)], 2)
    assert pq.pending() == (2, 20)


def test_flow_control_pauses_until_consumption_frees_space():
    pq = ProcessQueue(MQ, 0)
    pq.add([message(i, 100) for i in range(5)], 5)
    assert not pq.wait_for_space(max_messages=5, max_bytes=10_000, timeout=0.01)
    assert not pq.wait_for_space(max_messages=100, max_bytes=500, timeout=0.01)
    resumed = threading.Event()

    def puller():
        if pq.wait_for_space(max_messages=5, max_bytes=10_000, timeout=10):
            resumed.set()

    thread = threading.Thread(target=puller)
    thread.start()
    pq.done([0])
    thread.join(10)
    assert resumed.is_set()


def test_drop_releases_a_paused_puller():
    pq = ProcessQueue(MQ, 0)
    pq.add([message(0)], 1)
    pq.drop()
    assert pq.wait_for_space(max_messages=1, max_bytes=1, timeout=0.01)
    assert pq.dropped
