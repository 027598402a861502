"""Topic definitions in the config center (`/tidemq/topics/<name>`, JSON), the one home.

`{"name", "queues", "perm", "order"}`: brokers parse what they watch with
`parse_topic_definition` (and ignore, with a log line, what does not parse); the admin client
and the HTTP gateway write through `TopicDefinitions`, a compare-and-set create, so both
refuse an existing topic the same way (TOPIC_ALREADY_EXISTS).

>>> topics = TopicDefinitions(ConfigClient("127.0.0.1:7070"))      # doctest: +SKIP
>>> topics.create("orders", queues=8)                               # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from tidemq.common import errors
from tidemq.common.jsondoc import load_object
from tidemq.common.system_topics import DELETED_TOPICS_TOPIC
from tidemq.common.topic_names import TOPIC_NAME, is_topic_name
from tidemq.configclient.client import ConfigClient

TOPIC_PREFIX = "/tidemq/topics/"
PERM_READ = 2   # the queue bits of TopicConfig.perm in common.proto (RocketMQ's PermName)
PERM_WRITE = 4
PERM_READ_WRITE = PERM_READ | PERM_WRITE
MAX_QUEUES = 1024
DEFAULT_QUEUES = 4  # what a definition without "queues" gets
# Written by the brokers themselves, never by producers: a definition would let anyone append
# deletion markers (store/dispatcher.py).
RESERVED = frozenset({DELETED_TOPICS_TOPIC})


class TopicDefinitionError(ValueError):
    """A topic document in config-center that cannot be served (bad JSON, name or counts)."""


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    queues: int
    perm: int = PERM_READ_WRITE
    order: bool = False

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_topic_definition(key_name: str, raw: bytes) -> TopicConfig:
    """Validate one config-center document; `key_name` is the last segment of its key."""
    doc = load_object(raw, f"topic {key_name!r}: definition", TopicDefinitionError)
    name = doc.get("name", key_name)
    if name != key_name or not is_topic_name(name):
        raise TopicDefinitionError(
            f"topic {key_name!r}: name {name!r} must equal the key and match {TOPIC_NAME.pattern}"
        )
    if name in RESERVED:
        raise TopicDefinitionError(f"topic {name!r} is reserved for the brokers' own use")
    queues = doc.get("queues", DEFAULT_QUEUES)
    perm, order = doc.get("perm", PERM_READ_WRITE), doc.get("order")
    if not isinstance(queues, int) or isinstance(queues, bool) or not 1 <= queues <= MAX_QUEUES:
        raise TopicDefinitionError(f"topic {name!r}: queues must be 1..{MAX_QUEUES}, got {queues!r}")
    if not isinstance(perm, int) or isinstance(perm, bool) or perm & ~7:
        raise TopicDefinitionError(f"topic {name!r}: perm must be a 0..7 bit set, got {perm!r}")
    return TopicConfig(name, queues, perm, bool(order))


def topic_name(key: str) -> str:
    return key[len(TOPIC_PREFIX):]


class TopicDefinitions:
    """Create, delete and list definitions; a create is a compare-and-set (never overwrites).

    Waiting for a broker to serve a new topic is the caller's: it asks the name servers."""

    def __init__(self, config: ConfigClient) -> None:
        self.config = config

    def create(self, name: str, queues: int, *, order: bool = False) -> int:
        """Define the topic; the revision of the write. AlreadyExists if it is defined."""
        if not 1 <= queues <= MAX_QUEUES:
            raise errors.InvalidArgument(f"queues must be 1..{MAX_QUEUES}, got {queues}")
        if name in RESERVED:
            raise errors.InvalidArgument(f"topic name {name!r} is reserved for the brokers' own "
                                         "use; choose another", code="INVALID_TOPIC")
        definition = TopicConfig(name, queues, PERM_READ_WRITE, order)
        result = self.config.put(TOPIC_PREFIX + name, definition.to_json(), expected_revision=0)
        if not result.succeeded:
            raise errors.AlreadyExists(f"topic {name!r} already exists",
                                       code="TOPIC_ALREADY_EXISTS")
        return result.revision

    def delete(self, name: str) -> None:
        if not self.config.delete(TOPIC_PREFIX + name).deleted:
            raise errors.TopicNotExist(f"topic {name!r} does not exist")

    def documents(self) -> list[tuple[str, dict[str, Any] | None]]:
        """Every key's (topic name, JSON object), None where it is not one; by name."""
        listed = []
        for kv in self.config.range(TOPIC_PREFIX).kvs:
            try:
                doc = json.loads(kv.value)
            except ValueError:
                doc = None
            listed.append((topic_name(kv.key), doc if isinstance(doc, dict) else None))
        return listed
