"""The topic-name rule, its one definition: 1 to 249 characters of `[A-Za-z0-9._%|-]`, not
"." or ".." (RocketMQ's alphabet, plus Kafka's `.` and Kafka's length, refusing the two names
Kafka refuses; docs/client.md).

Every layer applies this rule: the producer before it encodes, the config center's topic
definitions, the HTTP gateway's JSON schema, and last the broker's CommitLog, where it matters
most: a topic name becomes a directory name under consumequeue/ (so no path separators, and
not "." or "..") and its length is the one-byte topic length of the record layout
(tidemq.common.record).

Why 249 (Kafka's limit) is safe here: the record layout's topic length is one unsigned byte
(up to 255; every reader, Python and C, reads it unsigned), and a directory name may be 255
bytes on the file systems we run on; the brokers build no longer name from a topic (consume
queues are consumequeue/<topic>/<queue id>/). Names the brokers derive from *group* names,
`%RETRY%<group>` and `%DLQ%<group>`, are topics too: so group names are capped at 249 - 7
(tidemq.configclient.groups.MAX_GROUP_NAME_LEN).
"""

from __future__ import annotations

import re
import string

from tidemq.common.errors import InvalidArgument

TOPIC_NAME_ALPHABET = "A-Za-z0-9._%|-"  # a regular-expression character class, brackets left out
TOPIC_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "._%|-")
MAX_TOPIC_NAME_LEN = 249   # Kafka's; was RocketMQ's 127
RESERVED_TOPIC_NAMES = frozenset({".", ".."})   # directory names; Kafka refuses them too
TOPIC_NAME = re.compile(  # fullmatch it
    rf"(?!\.\.?$)[{TOPIC_NAME_ALPHABET}]{{1,{MAX_TOPIC_NAME_LEN}}}")


def is_topic_name(name: object) -> bool:
    return isinstance(name, str) and TOPIC_NAME.fullmatch(name) is not None


def validate_topic_name(topic: str) -> str:
    """`topic`, or INVALID_TOPIC with the reason (the length, the characters outside, or a
    name that is only dots)."""
    if not isinstance(topic, str) or not 0 < len(topic) <= MAX_TOPIC_NAME_LEN:
        raise InvalidArgument(
            f"topic name must be 1..{MAX_TOPIC_NAME_LEN} characters"
            + (f", got {len(topic)}" if isinstance(topic, str) and topic else ""),
            code="INVALID_TOPIC")
    bad = sorted(set(topic) - TOPIC_NAME_CHARS)
    if bad:
        raise InvalidArgument(
            f"topic name {topic!r} has characters outside [{TOPIC_NAME_ALPHABET}]: "
            f"{''.join(bad)!r}", code="INVALID_TOPIC",
        )
    if topic in RESERVED_TOPIC_NAMES:
        raise InvalidArgument(f"topic name {topic!r} is not allowed: '.' and '..' are not "
                              "topic names", code="INVALID_TOPIC")
    return topic
