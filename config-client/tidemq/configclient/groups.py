"""Subscription-group definitions in the config center (`/tidemq/groups/<name>`, JSON).

One schema for both sides: brokers parse what they watch with `parse_group_definition` (and
refuse what does not parse, keeping the last good definition), admins write through
`SubscriptionGroups`, which validates first and writes with compare-and-set. Modelled on
RocketMQ's SubscriptionGroupConfig; fields absent from a document take the defaults below.

>>> groups = SubscriptionGroups(ConfigClient("127.0.0.1:7070"))     # doctest: +SKIP
>>> groups.create("billing", retry_max_times=3)                     # doctest: +SKIP
>>> groups.update("billing", {"consume_enable": False})             # doctest: +SKIP
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from tidemq.common import errors
from tidemq.common.jsondoc import load_object
from tidemq.common.system_topics import RETRY_PREFIX
from tidemq.common.topic_names import MAX_TOPIC_NAME_LEN
from tidemq.configclient.client import ConfigClient

GROUP_PREFIX = "/tidemq/groups/"
GROUP_NAME_ALPHABET = "A-Za-z0-9_%|-"  # a regular-expression character class, no brackets
# A group's retry and dead-letter topics, %RETRY%<group> and %DLQ%<group>, are topics: a group
# name leaves room for the longer prefix within the topic-name limit (249 - 7 = 242; a 255-
# character group made a 262-character retry topic, past the topic rule and a file name's 255).
MAX_GROUP_NAME_LEN = MAX_TOPIC_NAME_LEN - len(RETRY_PREFIX)
GROUP_NAME = re.compile(f"[{GROUP_NAME_ALPHABET}]{{1,{MAX_GROUP_NAME_LEN}}}")  # fullmatch it
MAX_RETRY_QUEUES = 64
MAX_RETRY_TIMES = 64


class GroupDefinitionError(ValueError):
    """A subscription-group document that cannot be applied (bad JSON, field, type or range)."""


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """What a broker enforces for one consumer group (RocketMQ's SubscriptionGroupConfig)."""

    name: str
    consume_enable: bool = True                 # False: pulls, commits and joins refused
    consume_from_min_enable: bool = True        # a new group may start at the queue's min
    consume_broadcast_enable: bool = True       # False: BROADCASTING consumption refused
    consume_message_orderly: bool = False       # the group consumes orderly (retry in place)
    retry_queue_nums: int = 1                   # queues of %RETRY%<group> (1..64)
    retry_max_times: int = 16                   # failures before %DLQ%<group> (0..64)
    broker_id: int = 0                          # broker of the group to consume from
    which_broker_when_consume_slowly: int = 1   # slave suggested to a slow consumer
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# field name -> (type, (low, high) or None, sentence describing a legal value)
FIELD_RULES: dict[str, tuple[type, tuple[int, int] | None, str]] = {
    "consume_enable": (bool, None, "true or false"),
    "consume_from_min_enable": (bool, None, "true or false"),
    "consume_broadcast_enable": (bool, None, "true or false"),
    "consume_message_orderly": (bool, None, "true or false"),
    "notify_consumer_ids_changed_enable": (bool, None, "true or false"),
    "retry_queue_nums": (int, (1, MAX_RETRY_QUEUES), f"an integer 1..{MAX_RETRY_QUEUES}"),
    "retry_max_times": (int, (0, MAX_RETRY_TIMES), f"an integer 0..{MAX_RETRY_TIMES}"),
    "broker_id": (int, (0, 2**31 - 1), "an integer >= 0"),
    "which_broker_when_consume_slowly": (int, (0, 2**31 - 1), "an integer >= 0"),
}
FIELDS = tuple(f.name for f in fields(SubscriptionGroupConfig))


def validate_group_name(name: str) -> None:
    if not isinstance(name, str) or not GROUP_NAME.fullmatch(name):
        raise GroupDefinitionError(f"group name {name!r} must be 1..{MAX_GROUP_NAME_LEN} "
                                   f"characters of [{GROUP_NAME_ALPHABET}]")


def _check_field(group: str, field: str, value: Any) -> None:
    kind, bounds, legal = FIELD_RULES[field]
    ok = isinstance(value, bool) if kind is bool else (
        isinstance(value, int) and not isinstance(value, bool)
        and (bounds is None or bounds[0] <= value <= bounds[1]))
    if not ok:
        raise GroupDefinitionError(f"group {group!r}: {field} must be {legal}, got {value!r}")


def group_from_fields(name: str, values: dict[str, Any]) -> SubscriptionGroupConfig:
    """Defaults overlaid with `values`; every field checked, unknown ones refused."""
    validate_group_name(name)
    if "name" in values and values["name"] != name:
        raise GroupDefinitionError(
            f"group {name!r}: name {values['name']!r} must equal the last segment of the key")
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise GroupDefinitionError(
            f"group {name!r}: unknown field(s) {', '.join(unknown)}; "
            f"known: {', '.join(FIELDS)}")
    for field, value in values.items():
        if field != "name":
            _check_field(name, field, value)
    return SubscriptionGroupConfig(**{**values, "name": name})


def parse_group_definition(key_name: str, raw: bytes) -> SubscriptionGroupConfig:
    """Validate one config-center document; `key_name` is the last segment of its key."""
    doc = load_object(raw, f"group {key_name!r}: definition", GroupDefinitionError)
    return group_from_fields(key_name, doc)


@dataclass(frozen=True)
class DefinedGroup:
    config: SubscriptionGroupConfig
    revision: int  # mod revision of the key: pass it back as `if_revision` to update safely


def _invalid(exc: GroupDefinitionError) -> errors.InvalidArgument:
    return errors.InvalidArgument(str(exc), code="INVALID_SUBSCRIPTION_GROUP")


class SubscriptionGroups:
    """Create, update, delete and list definitions; every write is a compare-and-set."""

    def __init__(self, config: ConfigClient) -> None:
        self.config = config

    @staticmethod
    def key(name: str) -> str:
        return GROUP_PREFIX + name

    def get(self, name: str) -> DefinedGroup:
        kv = self.config.get(self.key(name))
        if kv is None:
            raise errors.NotFound(f"subscription group {name!r} is not defined",
                                  code="SUBSCRIPTION_GROUP_NOT_EXIST")
        try:
            return DefinedGroup(parse_group_definition(name, kv.value), kv.mod_revision)
        except GroupDefinitionError as exc:
            raise _invalid(exc) from None

    def create(self, name: str, **values: Any) -> DefinedGroup:
        try:
            group = group_from_fields(name, values)
        except GroupDefinitionError as exc:
            raise _invalid(exc) from None
        result = self.config.put(self.key(name), group.to_json(), expected_revision=0)
        if not result.succeeded:
            raise errors.AlreadyExists(f"subscription group {name!r} is already defined",
                                       code="SUBSCRIPTION_GROUP_ALREADY_EXISTS")
        return DefinedGroup(group, result.revision)

    def update(self, name: str, changes: dict[str, Any], *,
               if_revision: int | None = None) -> DefinedGroup:
        """Change some fields. With `if_revision`, only if the definition is still that one
        (else PRECONDITION_FAILED); without, re-read and retry on a concurrent change."""
        for _ in range(50):
            current = self.get(name)
            if if_revision is not None and current.revision != if_revision:
                raise self._stale(name, if_revision, current.revision)
            try:
                group = replace(current.config, **_checked_changes(name, changes))
            except GroupDefinitionError as exc:
                raise _invalid(exc) from None
            result = self.config.put(self.key(name), group.to_json(),
                                     expected_revision=current.revision)
            if result.succeeded:
                return DefinedGroup(group, result.revision)
            if if_revision is not None:
                raise self._stale(name, if_revision, result.current_mod_revision)
        raise errors.Conflict(f"subscription group {name!r} kept changing; gave up")

    def delete(self, name: str, *, if_revision: int | None = None) -> None:
        result = self.config.delete(self.key(name), expected_revision=if_revision)
        if result.deleted:
            return
        if not result.succeeded and result.current_mod_revision:
            raise self._stale(name, if_revision or 0, result.current_mod_revision)
        raise errors.NotFound(f"subscription group {name!r} is not defined",
                              code="SUBSCRIPTION_GROUP_NOT_EXIST")

    def list(self) -> list[DefinedGroup | tuple[str, str]]:
        """Every definition, by name; an invalid one as (name, why it is refused)."""
        listed: list[DefinedGroup | tuple[str, str]] = []
        for kv in self.config.range(GROUP_PREFIX).kvs:
            name = kv.key[len(GROUP_PREFIX):]
            try:
                listed.append(DefinedGroup(parse_group_definition(name, kv.value),
                                           kv.mod_revision))
            except GroupDefinitionError as exc:
                listed.append((name, str(exc)))
        return listed

    @staticmethod
    def _stale(name: str, expected: int, current: int) -> errors.PreconditionFailed:
        return errors.PreconditionFailed(
            f"subscription group {name!r} is at revision {current}, not {expected}; "
            "re-read it and retry")


def _checked_changes(name: str, changes: dict[str, Any]) -> dict[str, Any]:
    group_from_fields(name, changes)  # same checks as a whole definition
    return {k: v for k, v in changes.items() if k != "name"}
