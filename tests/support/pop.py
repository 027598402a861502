"""Pop consumption helpers for integration tests."""

from __future__ import annotations

from tests.support.processes import wait_until


def pop_until(consumer, count: int, *, invisible_s: float, max_messages: int = 32,
              timeout: float = 30.0) -> dict:
    """Pop (long-polled) until `count` distinct bodies are held; the popped messages by body."""
    held: dict = {}

    def enough() -> bool:
        for received in consumer.receive(max_messages, invisible_duration_s=invisible_s,
                                         wait_s=1):
            held[received.body] = received
        return len(held) >= count

    wait_until(enough, timeout, message=f"{count} messages popped")
    return held
