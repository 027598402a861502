"""Topic definitions in the config center (`/tidemq/topics/<name>`, JSON), the one home.

`{"name", "queues", "perm", "order"}`, optionally `"config": {"retention.ms": 60000, ...}` (per-
topic settings with Kafka's names, topic_settings.py), `"group_queues": {"broker-a": 2, ...}` and
`"partitions": [["broker-a", 0], ...]`: brokers parse what they watch with
`parse_topic_definition` (and ignore, with a log line, what does not parse); the admin client
and the HTTP gateway write through `TopicDefinitions`, a compare-and-set create, so both
refuse an existing topic the same way (TOPIC_ALREADY_EXISTS).

Queue counts: without `group_queues` every broker group serves `queues` queues (definitions
written before per-group counts read so). With it, a group serves the count named for it and a
group it does not name serves none (`queues` then holds the largest count, for readers that
predate it). `TopicConfig.for_group` is what one broker serves.

The partition map (`partitions`, read by gateway-kafka and never by brokers): partition i is
the i-th (broker group, queue id) pair. It is written when a topic is created with one, and
after that only ever extended (`TopicDefinitions.extend_partitions`), so a partition keeps its
queue for the life of the topic, even while its group is out of the route.

>>> topics = TopicDefinitions(ConfigClient("127.0.0.1:7070"))      # doctest: +SKIP
>>> topics.create("orders", queues=8)                               # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tidemq.common import errors
from tidemq.common.jsondoc import load_object
from tidemq.common.system_topics import DELETED_TOPICS_TOPIC
from tidemq.common.topic_names import TOPIC_NAME, is_topic_name
from tidemq.configclient import topic_settings
from tidemq.configclient.client import ConfigClient

TOPIC_PREFIX = "/tidemq/topics/"
PERM_READ = 2   # the queue bits of TopicConfig.perm in common.proto (RocketMQ's PermName)
PERM_WRITE = 4
PERM_READ_WRITE = PERM_READ | PERM_WRITE
MAX_QUEUES = 1024
MAX_PARTITIONS = 16 * MAX_QUEUES   # entries of a partition map
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
    # (broker group, queues) by group name; () = `queues` on every group
    group_queues: tuple[tuple[str, int], ...] = ()
    # the per-topic settings set on the topic (topic_settings.py), by name; the rest default
    config: tuple[tuple[str, int | str], ...] = ()

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def queues_on(self, broker_group: str) -> int:
        """How many queues `broker_group` serves (0: it does not serve the topic)."""
        if not self.group_queues:
            return self.queues
        return dict(self.group_queues).get(broker_group, 0)

    def for_group(self, broker_group: str) -> TopicConfig | None:
        """What one broker group serves: its own queue count, or None if it serves none."""
        queues = self.queues_on(broker_group)
        if not queues:
            return None
        return TopicConfig(self.name, queues, self.perm, self.order, config=self.config)

    def setting(self, name: str) -> int | str:
        """The effective value of a per-topic setting (topic_settings.SETTINGS). Read on the
        send path: a scan of the few pairs set, no mapping built per call."""
        for key, value in self.config:
            if key == name:
                return value
        return topic_settings.SETTINGS[name].default

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        del doc["group_queues"], doc["config"]
        if self.group_queues:
            doc["group_queues"] = dict(self.group_queues)
        if self.config:
            doc["config"] = dict(self.config)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TopicConfig:
        """What `to_json` wrote (a broker's persisted table)."""
        doc = dict(doc)
        doc["group_queues"] = tuple(sorted(doc.pop("group_queues", {}).items()))
        doc["config"] = tuple(sorted(doc.pop("config", {}).items()))
        return cls(**doc)


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
    try:
        config = topic_settings.stored(doc.get("config"), name)
    except ValueError as exc:
        raise TopicDefinitionError(str(exc)) from None
    return TopicConfig(name, queues, perm, bool(order),
                       _group_queues(name, doc.get("group_queues")), tuple(sorted(config.items())))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_QUEUES


def _group_queues(name: str, raw: Any) -> tuple[tuple[str, int], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw or not all(
            isinstance(g, str) and g and _count(n) for g, n in raw.items()):
        raise TopicDefinitionError(
            f"topic {name!r}: group_queues must map broker group names to 1..{MAX_QUEUES}, "
            f"got {raw!r}")
    return tuple(sorted(raw.items()))


def parse_partition_map(topic: TopicConfig, raw: Any) -> list[tuple[str, int]] | None:
    """The `partitions` of a definition, checked against its queue counts; None if absent.

    TopicDefinitionError if it is not a list of distinct [broker group, queue id] pairs naming
    queues the definition has."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) > MAX_PARTITIONS:
        raise TopicDefinitionError(f"topic {topic.name!r}: partitions must be a list of "
                                   f"at most {MAX_PARTITIONS} [broker group, queue] pairs")
    pairs: list[tuple[str, int]] = []
    for entry in raw:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], int) and not isinstance(entry[1], bool)
                and 0 <= entry[1] < topic.queues_on(entry[0])):
            raise TopicDefinitionError(
                f"topic {topic.name!r}: partition {len(pairs)} is {entry!r}, not a "
                "[broker group, queue id] of a queue the topic has")
        pairs.append((entry[0], entry[1]))
    if len(set(pairs)) != len(pairs):
        raise TopicDefinitionError(f"topic {topic.name!r}: a queue is in the partition map twice")
    return pairs


def spread(groups: list[str], count: int, start: dict[str, int] | None = None
           ) -> list[tuple[str, int]]:
    """`count` new (group, queue id) pairs over `groups`, each to the group with the fewest
    queues so far (ties in the order given), queue ids going on from `start`."""
    if not groups:
        raise errors.ServiceUnavailable("no broker group is registered to hold queues",
                                        code="BROKER_NOT_FOUND")
    queues = {g: (start or {}).get(g, 0) for g in groups}
    pairs = []
    for _ in range(count):
        group = min(groups, key=lambda g: queues[g])
        pairs.append((group, queues[group]))
        queues[group] += 1
    return pairs


def topic_name(key: str) -> str:
    return key[len(TOPIC_PREFIX):]


class TopicDefinitions:
    """Create, delete and list definitions; a create is a compare-and-set (never overwrites).

    Waiting for a broker to serve a new topic is the caller's: it asks the name servers."""

    def __init__(self, config: ConfigClient) -> None:
        self.config = config

    def create(self, name: str, queues: int = 0, *, order: bool = False,
               partitions: list[tuple[str, int]] | None = None,
               config: dict[str, Any] | None = None) -> int:
        """Define the topic; the revision of the write. AlreadyExists if it is defined.

        `queues` on every broker group, or `partitions`: the partition map, from which each
        group's queue count follows (a group it does not name serves none). `config`: per-topic
        settings (topic_settings.py; InvalidArgument INVALID_TOPIC_CONFIG naming a bad one)."""
        if name in RESERVED:
            raise errors.InvalidArgument(f"topic name {name!r} is reserved for the brokers' own "
                                         "use; choose another", code="INVALID_TOPIC")
        settings = tuple(sorted(topic_settings.parse_settings(config or {}).items()))
        if partitions is not None:
            definition = self._with_partitions(
                TopicConfig(name, 1, PERM_READ_WRITE, order, config=settings), list(partitions))
            doc = definition.to_json() | {"partitions": [list(p) for p in partitions]}
        else:
            if not 1 <= queues <= MAX_QUEUES:
                raise errors.InvalidArgument(f"queues must be 1..{MAX_QUEUES}, got {queues}")
            doc = TopicConfig(name, queues, PERM_READ_WRITE, order, config=settings).to_json()
        result = self.config.put(TOPIC_PREFIX + name, doc, expected_revision=0)
        if not result.succeeded:
            raise errors.AlreadyExists(f"topic {name!r} already exists",
                                       code="TOPIC_ALREADY_EXISTS")
        return result.revision

    @staticmethod
    def _with_partitions(topic: TopicConfig, partitions: list[tuple[str, int]]) -> TopicConfig:
        """`topic` with the queue counts `partitions` needs (never fewer than it has)."""
        counts = {g: topic.queues_on(g) for g, _ in partitions} | dict(topic.group_queues)
        for group, queue in partitions:
            counts[group] = max(counts.get(group, 0), queue + 1)
        if any(n > MAX_QUEUES for n in counts.values()):
            raise errors.InvalidArgument(f"a broker group would hold more than {MAX_QUEUES} "
                                         "queues of the topic", code="INVALID_PARTITIONS")
        counts = {g: n for g, n in counts.items() if n}
        return TopicConfig(topic.name, max(counts.values()), topic.perm, topic.order,
                           tuple(sorted(counts.items())), topic.config)

    def settings(self, name: str) -> dict[str, int | str]:
        """The settings set on the topic (not the defaults). TopicNotExist if undefined."""
        return dict(self._read(name)[2].config)

    def alter(self, name: str, changes: dict[str, Any]) -> dict[str, int | str]:
        """Change per-topic settings live (a value of None: back to its default), a
        compare-and-set retried on conflict; the settings set on the topic afterwards.
        InvalidArgument INVALID_TOPIC_CONFIG naming a bad setting; TopicNotExist."""
        parsed = topic_settings.parse_settings(changes, allow_null=True)
        settings: dict[str, int | str] = {}

        def altered(kv) -> dict[str, Any]:
            if kv is None:
                raise errors.TopicNotExist(f"topic {name!r} does not exist")
            doc, topic = json.loads(kv.value), parse_topic_definition(name, kv.value)
            settings.clear()
            settings.update(topic.config)
            for setting, value in parsed.items():
                if value is None:
                    settings.pop(setting, None)
                else:
                    settings[setting] = value
            doc.pop("config", None)
            if settings:
                doc["config"] = dict(sorted(settings.items()))
            return doc

        self.config.update(TOPIC_PREFIX + name, altered)
        return settings

    def partition_map(self, name: str) -> tuple[TopicConfig, list[tuple[str, int]] | None]:
        """The topic's definition and partition map (None: it has none yet).
        TopicNotExist if it is not defined; TopicDefinitionError if it does not parse."""
        _, doc, topic = self._read(name)
        return topic, parse_partition_map(topic, doc.get("partitions"))

    def extend_partitions(self, name: str, extend: Callable[
            [TopicConfig, list[tuple[str, int]] | None], list[tuple[str, int]]],
                          ) -> list[tuple[str, int]]:
        """Append to the topic's partition map, a compare-and-set retried on conflict.

        `extend(definition, current map or None)` returns the pairs to append ([] = none);
        queue counts grow to hold them (a group not named before gets queues from 0 up for a
        definition with `group_queues`). The map after the write; the existing entries never
        move, so a partition keeps its queue."""
        for _ in range(50):
            kv, doc, topic = self._read(name)
            current = parse_partition_map(topic, doc.get("partitions"))
            added = extend(topic, current)
            if not added:
                return current or []
            merged = (current or []) + list(added)
            if len(set(merged)) != len(merged):
                raise errors.InvalidArgument(f"topic {name!r}: a queue would be in the "
                                             "partition map twice", code="INVALID_PARTITIONS")
            grown = topic if not topic.group_queues and all(
                q < topic.queues for _, q in merged) else self._with_partitions(topic, merged)
            doc.update(grown.to_json())
            doc["partitions"] = [list(p) for p in merged]
            if self.config.put(TOPIC_PREFIX + name, doc, expected_revision=kv.mod_revision).succeeded:
                return merged
        raise errors.ServiceUnavailable(f"topic {name!r}: its partition map kept changing "
                                        "under the update", code="SERVICE_UNAVAILABLE")

    def _read(self, name: str) -> tuple[Any, dict[str, Any], TopicConfig]:
        """The topic's stored value (its mod revision for a compare-and-set), its JSON object and
        its parsed definition. TopicNotExist; TopicDefinitionError if it does not parse."""
        kv = self.config.get(TOPIC_PREFIX + name)
        if kv is None:
            raise errors.TopicNotExist(f"topic {name!r} does not exist")
        topic = parse_topic_definition(name, kv.value)
        return kv, json.loads(kv.value), topic

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
