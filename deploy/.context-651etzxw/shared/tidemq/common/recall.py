"""Recall handles: what a send of a scheduled message answers, to take it back later.

RocketMQ 5.3 clients treat the handle as opaque text and hand it back to `RecallMessage`.
TideMQ's names the message where it waits: the topic it was sent to, the broker group holding
it, its unique id (UNIQ_KEY, indexed by the broker) and the id its producer knows it by (a
RocketMQ client's own message id, else the unique id). URL-safe base64 of four lines after
a version line, so it survives HTTP paths, JSON and shells unchanged.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from tidemq.common import errors

VERSION = "v1"
MAX_HANDLE = 4096


def _invalid(detail: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(f"not a recall handle: {detail}",
                                  code="INVALID_RECALL_HANDLE")


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    unique_id: str
    message_id: str = ""

    def __post_init__(self) -> None:
        for name in ("topic", "broker_name", "unique_id", "message_id"):
            if "\n" in getattr(self, name):
                raise ValueError(f"a recall handle's {name} cannot hold a line break")

    def encode(self) -> str:
        text = "\n".join((VERSION, self.topic, self.broker_name, self.unique_id,
                          self.message_id or self.unique_id))
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, handle: str, topic: str | None = None) -> RecallHandle:
        """INVALID_RECALL_HANDLE with what is wrong, for anything a send did not answer (or,
        given `topic`, a handle of another topic)."""
        if not handle:
            raise _invalid("it is empty")
        if len(handle) > MAX_HANDLE:
            raise _invalid(f"{len(handle)} characters, more than any handle has")
        try:
            text = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode()
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise _invalid("it is not URL-safe base64 of UTF-8 text") from None
        lines = text.split("\n")
        if lines[0] != VERSION:
            raise _invalid(f"unknown version {lines[0][:16]!r} (this broker reads {VERSION})")
        if len(lines) != 5 or not all(lines[1:4]):
            raise _invalid("it does not name a topic, a broker group and a message")
        if topic is not None and lines[1] != topic:
            raise _invalid(f"it is of topic {lines[1]!r}, not {topic!r}")
        return cls(*lines[1:])
