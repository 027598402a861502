"""read_ahead: the next pull runs while the last reply is decoded, in order, errors in place."""

from __future__ import annotations

import threading

import pytest
from tidemq.analytics.reading import read_ahead
from tidemq.common.errors import PreconditionFailed


def test_replies_come_in_order_and_the_next_pull_is_already_under_way():
    asked = []
    second_asked = threading.Event()

    def pulls():
        for n in range(4):
            asked.append(n)
            if n == 1:
                second_asked.set()
            yield b"reply-%d" % n

    replies = read_ahead(pulls())
    assert next(replies) == b"reply-0"
    # the caller still holds reply 0; the pull of reply 1 happens meanwhile
    assert second_asked.wait(timeout=10), "the next pull did not start before it was asked for"
    assert list(replies) == [b"reply-1", b"reply-2", b"reply-3"]
    assert asked == [0, 1, 2, 3]


def test_a_failed_pull_is_raised_where_its_reply_was_due():
    def pulls():
        yield b"first"
        raise PreconditionFailed("planned data is gone", code="OFFSET_OUT_OF_RANGE")

    replies = read_ahead(pulls())
    assert next(replies) == b"first"
    with pytest.raises(PreconditionFailed, match="planned data is gone"):
        next(replies)


def test_nothing_to_pull():
    assert list(read_ahead(iter(()))) == []
