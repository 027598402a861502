"""Per-topic settings, with Kafka's names, kept in the topic definition (`"config": {...}`).

A definition holds only the settings someone set (source `topic`); every other one takes its
default (source `default`). `parse_settings` validates a set of changes (strings from the
CLI or Kafka, JSON values from the HTTP gateway) and answers InvalidArgument naming the
setting; `effective` lists every setting's value and where it came from, the one shape the
CLI, the HTTP gateway and gateway-kafka show (docs/topics.md).

>>> parse_settings({"retention.ms": "60000", "cleanup.policy": "compact"})
{'retention.ms': 60000, 'cleanup.policy': 'compact'}
>>> effective({"retention.ms": 60000})["retention.ms"]
{'value': 60000, 'source': 'topic'}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tidemq.common import errors

CODE = "INVALID_TOPIC_CONFIG"
MAX_MS = 2**63 - 1
MAX_MESSAGE_BYTES = 64 << 20     # what one record may be at most on any broker
DEFAULT_RETENTION_MS = 72 * 3600 * 1000   # the broker's retention_hours default (store/config.py)
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024   # record.DEFAULT_MAX_MESSAGE_SIZE
POLICIES = ("delete", "compact", "compact,delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: int | str
    check: Callable[[str, Any], int | str]
    doc: str

    @property
    def integer(self) -> bool:
        return getattr(self.check, "integer", False)

    @property
    def json_schema(self) -> dict[str, Any]:
        """The JSON values it takes (the HTTP gateway's OpenAPI document): what `check` says."""
        return getattr(self.check, "json_schema", {})


def _integer(low: int, high: int, minus_one: bool = False) -> Callable[[str, Any], int]:
    def check(name: str, value: Any) -> int:
        number: int | None = None
        if isinstance(value, float) and value.is_integer():   # JSON's 60000.0 is 60000
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
            number = int(value.strip())
        allowed = f"{low}..{high}" + (" or -1 (no limit)" if minus_one else "")
        if number is None or not (low <= number <= high or (minus_one and number == -1)):
            raise errors.InvalidArgument(
                f"topic setting {name!r} must be an integer {allowed}, got {value!r}", code=CODE)
        return number
    ranged = {"type": "integer", "minimum": low, "maximum": high}
    check.json_schema = {"anyOf": [ranged, {"const": -1}]} if minus_one else ranged
    check.integer = True
    return check


def _policy(name: str, value: Any) -> str:
    words = [w.strip() for w in value.split(",")] if isinstance(value, str) else None
    if not words or not set(words) <= {"delete", "compact"} or len(set(words)) != len(words):
        raise errors.InvalidArgument(
            f"topic setting {name!r} must be one of {', '.join(POLICIES)}, got {value!r}",
            code=CODE)
    return "compact,delete" if len(words) == 2 else words[0]


def _timestamp_type(name: str, value: Any) -> str:
    if value not in TIMESTAMP_TYPES:
        raise errors.InvalidArgument(
            f"topic setting {name!r} must be one of {', '.join(TIMESTAMP_TYPES)}, got {value!r}",
            code=CODE)
    return value


_policy.json_schema = {"enum": list(POLICIES)}
_timestamp_type.json_schema = {"enum": list(TIMESTAMP_TYPES)}


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("retention.ms", DEFAULT_RETENTION_MS, _integer(1, MAX_MS, minus_one=True),
            "how long a queue keeps a record (its store time + this); -1 = for ever. "
            "Default: the broker's retention_hours"),
    Setting("retention.bytes", -1, _integer(1, MAX_MS, minus_one=True),
            "bytes of records one queue keeps at most (the oldest go first); -1 = no limit"),
    Setting("cleanup.policy", "delete", _policy,
            "delete (retention), compact (the latest record per key), or compact,delete"),
    Setting("min.compaction.lag.ms", 0, _integer(0, MAX_MS),
            "a record stays uncompacted at least this long after it was stored"),
    Setting("delete.retention.ms", 86_400_000, _integer(0, MAX_MS),
            "how long a tombstone (null body) of a compacted topic stays readable"),
    Setting("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES, _integer(1, MAX_MESSAGE_BYTES),
            "largest record the topic accepts, in bytes (never above the broker's "
            "max_message_size)"),
    Setting("message.timestamp.type", "CreateTime", _timestamp_type,
            "the time Kafka consumers see: the producer's (CreateTime) or the broker's store "
            "time (LogAppendTime); gateway-kafka's, brokers keep both"),
)}


def parse_settings(changes: Mapping[str, Any], *, allow_null: bool = False
                   ) -> dict[str, int | str | None]:
    """Validated `changes`; with `allow_null`, None means "back to the default"."""
    if not isinstance(changes, Mapping):
        raise errors.InvalidArgument(f"topic config must be an object of settings, got "
                                     f"{changes!r}", code=CODE)
    parsed: dict[str, int | str | None] = {}
    for name, value in changes.items():
        setting = SETTINGS.get(name)
        if setting is None:
            raise errors.InvalidArgument(
                f"unknown topic setting {name!r}; known: {', '.join(SETTINGS)}", code=CODE)
        parsed[name] = None if value is None and allow_null else setting.check(name, value)
    return parsed


def parse_json_settings(changes: Any, *, allow_null: bool = False) -> dict[str, int | str | None]:
    """`parse_settings` for JSON documents (the HTTP gateway): an integer setting takes a JSON
    number, not a string of digits (the CLI and Kafka send strings; JSON has numbers), so
    the document's schema (`json_schema`) and the server agree."""
    if isinstance(changes, Mapping):
        for name, value in changes.items():
            setting = SETTINGS.get(name)
            if setting is not None and setting.integer and isinstance(value, str):
                raise errors.InvalidArgument(
                    f"topic setting {name!r} must be a JSON integer, got {value!r}", code=CODE)
    return parse_settings(changes, allow_null=allow_null)


def json_schema(*, allow_null: bool = False) -> dict[str, Any]:
    """The `config` object's JSON schema: the known settings, each with its values."""
    def one(setting: Setting) -> dict[str, Any]:
        schema = {**setting.json_schema, "description": setting.doc}
        return {"anyOf": [schema, {"type": "null"}]} if allow_null else schema
    return {"type": "object", "additionalProperties": False,
            "properties": {name: one(setting) for name, setting in SETTINGS.items()}}


def parse_assignments(pairs: list[str]) -> dict[str, str]:
    """`--config k=v` options (the CLI) as a mapping; a malformed one names itself."""
    changes: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise errors.InvalidArgument(f"--config wants NAME=VALUE, got {pair!r}", code=CODE)
        changes[name.strip()] = value.strip()
    return changes


def stored(config: Any, topic: str) -> dict[str, int | str]:
    """The `config` object of a stored definition, validated (ValueError naming the topic)."""
    if config is None:
        return {}
    try:
        return {k: v for k, v in parse_settings(config).items() if v is not None}
    except errors.InvalidArgument as exc:
        raise ValueError(f"topic {topic!r}: {exc.message}") from None


def effective(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every setting: {"value", "source": "topic" | "default"}, in SETTINGS order."""
    return {name: ({"value": config[name], "source": "topic"} if name in config
                   else {"value": s.default, "source": "default"})
            for name, s in SETTINGS.items()}


def value(config: Mapping[str, Any], name: str) -> int | str:
    return config.get(name, SETTINGS[name].default)
