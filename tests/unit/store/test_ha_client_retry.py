"""The slave's reconnection pauses: short first (a promoted master opens its HA server a moment
after the other replicas hear of it), never longer than `reconnect_interval_ms`."""

from itertools import islice

from tidemq.broker.store.ha.client import FIRST_RETRY_S, retry_pauses


def test_pauses_start_short_and_double_up_to_the_interval():
    assert list(islice(retry_pauses(1.0), 7)) == [FIRST_RETRY_S, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_an_interval_shorter_than_the_first_retry_is_the_only_pause():
    assert list(islice(retry_pauses(0.01), 3)) == [0.01, 0.01, 0.01]
