"""The HA stream's tasks end when told to, even when a cancellation is swallowed once (as
Python 3.11's asyncio.wait_for can do when its inner future completes at the same moment)."""

from __future__ import annotations

import asyncio
import contextlib

from tidemq.broker.store.ha.client import HAClient
from tidemq.broker.store.ha.config import HAConfig
from tidemq.broker.store.ha.tasks import cancel_and_wait

from tests.support.processes import wait_until_async

from .helpers import open_store, small_config

ENTERED: list[bool] = []   # the stub records that it runs, so the tests wait for that


async def _swallows_one_cancel() -> None:
    ENTERED.append(True)
    with contextlib.suppress(asyncio.CancelledError):   # what a racing wait_for does:
        await asyncio.sleep(3600)                        # the task goes on as if never cancelled
    await asyncio.sleep(3600)


def test_cancel_and_wait_cancels_again_a_task_that_went_on():
    async def scenario() -> bool:
        ENTERED.clear()
        task = asyncio.ensure_future(_swallows_one_cancel())
        await wait_until_async(lambda: ENTERED, 10, message="the stubborn task to run")
        ending = asyncio.ensure_future(cancel_and_wait([task]))
        await asyncio.wait({ending}, timeout=10)
        return ending.done() and task.cancelled()

    assert asyncio.run(scenario())


def test_ha_client_stop_ends_a_connection_attempt_that_swallowed_its_cancel(tmp_path):
    store = open_store(small_config(tmp_path))
    try:
        client = HAClient(store, 1, "127.0.0.1:9", HAConfig())
        client._replicate_once = _swallows_one_cancel   # a connect that swallows the cancel

        async def scenario() -> bool:
            ENTERED.clear()
            client.start()
            await wait_until_async(lambda: ENTERED, 10, message="the client's connect to run")
            stop = asyncio.ensure_future(client.stop())
            done, _ = await asyncio.wait({stop}, timeout=10)   # not wait_for: it would cancel
            if stop not in done:                                # stop() and so end the task
                stop.cancel()                                   # (hung for good before the fix)
            return stop in done

        assert asyncio.run(scenario()), "HAClient.stop() did not return"
        assert not client.connected
    finally:
        store.shutdown()
