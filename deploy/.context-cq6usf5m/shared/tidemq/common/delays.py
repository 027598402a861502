"""Delay levels and durations shared by the client (validation, CLI) and the broker (timer).

RocketMQ's 18 delay levels (`messageDelayLevel`, ref "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m
10m 20m 30m 1h 2h"): a message sent with level n is delivered that long after it was stored.
The broker can redefine the durations (setting `message_delay_level`), never their number.
"""

from __future__ import annotations

import re

DELAY_LEVEL_COUNT = 18
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DEFAULT_MAX_DELAY_MS = 3 * 24 * 3600 * 1000  # RocketMQ's timerMaxDelaySec, 3 days

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")


def parse_duration_ms(text: str) -> int:
    """"250ms", "10s", "1.5m", "2h", "3d" -> milliseconds; ValueError for anything else."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"duration {text!r} must be a number with a unit ms, s, m, h or d")
    return int(float(match.group(1)) * _UNITS_MS[match.group(2)])


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """The 18 level durations in ms, from RocketMQ's space-separated `messageDelayLevel`."""
    levels = tuple(parse_duration_ms(item) for item in text.split())
    if len(levels) != DELAY_LEVEL_COUNT:
        raise ValueError(f"message_delay_level must name {DELAY_LEVEL_COUNT} durations, "
                         f"got {len(levels)}")
    return levels


def retry_delay_level(reconsume_times: int) -> int:
    """The delay level of a consumer's retry: RocketMQ's 3 + times already reconsumed (the
    first retry waits level 3, 10 s by default), capped at the last level."""
    return min(3 + max(reconsume_times, 0), DELAY_LEVEL_COUNT)
