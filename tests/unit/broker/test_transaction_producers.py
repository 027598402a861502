"""The broker's table of live producers: check-backs go round robin to producers of the group
with an open stream; a producer silent past the expiry, or without a stream, gets none."""

from __future__ import annotations

import asyncio

from tidemq.broker.transactions.producers import ProducerTable

from tests.support.clock import FakeClock


def test_checks_go_round_robin_to_live_producers_of_the_group():
    async def scenario():
        clock = FakeClock()
        table = ProducerTable(expiry_s=120, clock=clock)
        a = table.open_stream("g", "a")
        b = table.open_stream("g", "b")
        table.heartbeat("g", "no-stream")
        table.open_stream("other", "c")
        chosen = {table.deliver("g", n) for n in range(4)}
        assert chosen == {"a", "b"} and a.qsize() == b.qsize() == 2
        clock.now = 100
        table.heartbeat("g", "b")
        clock.now = 150          # a: silent for 150 s; b: 50 s
        assert [p.client_id for p in table.live("g")] == ["b"]
        table.close_stream("g", "b", b)
        assert table.deliver("g", "x") == ""

    asyncio.run(scenario())


def test_close_all_ends_every_stream():
    async def scenario():
        table = ProducerTable()
        streams = [table.open_stream("g", f"p{i}") for i in range(3)]
        table.close_all()
        assert [await s.get() for s in streams] == [None, None, None]
        late = table.open_stream("g", "late")   # reconnecting while the broker stops
        assert await late.get() is None and table.deliver("g", "x") == ""

    asyncio.run(scenario())
