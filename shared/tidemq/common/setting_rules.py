"""Every dynamic (live) setting a service reads from the config center, with its rule: one
home, so a value is checked when it is written (the config center refuses it, naming what is
legal) and again, the same way, by each service that applies it.

Keys are `/tidemq/config/{cluster|group|broker}/<owner>/<setting>` (docs/config-center.md).
One name may be read by several services with different rules (`retention_hours`: the
broker's CommitLog and the trace collector's spans); a written value must suit at least one
of them — the scope decides which service reads it, and a service still refuses (and logs) a
value outside its own rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tidemq.common.errors import InvalidArgument

SETTINGS_ROOT = "/tidemq/config/"
SCOPES = ("cluster", "group", "broker")


@dataclass(frozen=True)
class Rule:
    """How a service reads one live setting: parse the text, check it, say what is legal."""

    parse: Callable[[str], object]
    valid: Callable[[object], bool]
    legal: str

    def accepts(self, text: str) -> bool:
        try:
            return bool(self.valid(self.parse(text)))
        except ValueError:
            return False


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _hour(text: str) -> int | None:
    hour = int(text)
    return None if hour < 0 else hour


def parse_quiet_operations(text: str) -> frozenset[str]:
    """`trace_quiet_operations`: operation names (gRPC methods, HTTP path ends) separated by
    commas or spaces; empty = trace everything (tidemq.common.sampling)."""
    names = frozenset(name for name in text.replace(",", " ").split() if name)
    bad = sorted(name for name in names if not _OPERATION_NAME.match(name))
    if bad:
        raise ValueError(f"not operation names: {bad}")
    return names


_OPERATION_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
# Every traced service follows it live (its sampler's quiet list; the trace collector does
# not trace itself).
QUIET_OPERATIONS_RULE = Rule(parse_quiet_operations, lambda v: isinstance(v, frozenset),
                             "operation names (letters, digits, _ . -) separated by commas "
                             "or spaces, or empty to trace everything")
TRACE_QUIET_OPERATIONS = "trace_quiet_operations"

GATEWAY_MAX_FAIL_MAX = 10_000
GATEWAY_MAX_RESET_S = 3600.0
COLLECTOR_MAX_SPANS = 1_000_000_000
COLLECTOR_MAX_HOURS = 87_600.0  # ten years
COLLECTOR_MAX_MB = 1_048_576.0  # one TiB

BROKER_RULES: Mapping[str, Rule] = {
    "retention_hours": Rule(float, lambda v: v > 0, "a number of hours above 0"),
    "disk_max_used_ratio": Rule(float, lambda v: 0 < v <= 1, "a ratio in (0, 1]"),
    "disk_warn_ratio": Rule(float, lambda v: 0 < v <= 1, "a ratio in (0, 1]"),
    "disk_full_ratio": Rule(float, lambda v: 0 < v <= 1, "a ratio in (0, 1]"),
    "delete_when_hour": Rule(_hour, lambda v: v is None or 0 <= v <= 23,
                             "an hour 0..23, or -1 for any time"),
    TRACE_QUIET_OPERATIONS: QUIET_OPERATIONS_RULE,
}
NAME_SERVER_RULES: Mapping[str, Rule] = {
    "broker_expiry_s": Rule(float, lambda v: 1 <= v <= 86_400, "seconds in [1, 86400]"),
    "scan_interval_s": Rule(float, lambda v: 0.1 <= v <= 3_600, "seconds in [0.1, 3600]"),
    "unclean_election": Rule(parse_bool, lambda v: isinstance(v, bool), "true or false"),
    TRACE_QUIET_OPERATIONS: QUIET_OPERATIONS_RULE,
}
TRACE_COLLECTOR_RULES: Mapping[str, Rule] = {
    "retention_spans": Rule(int, lambda v: 0 <= v <= COLLECTOR_MAX_SPANS,
                            f"an integer 0..{COLLECTOR_MAX_SPANS} (0 = no count bound)"),
    "retention_hours": Rule(float, lambda v: 0 <= v <= COLLECTOR_MAX_HOURS,
                            f"hours in [0, {COLLECTOR_MAX_HOURS:g}] (0 = no age bound)"),
    "retention_mb": Rule(float, lambda v: 0 <= v <= COLLECTOR_MAX_MB,
                         f"MiB in [0, {COLLECTOR_MAX_MB:g}] (0 = no size bound)"),
}
GATEWAY_RULES: Mapping[str, Rule] = {
    "breaker_fail_max": Rule(int, lambda v: 1 <= v <= GATEWAY_MAX_FAIL_MAX,
                             f"an integer 1..{GATEWAY_MAX_FAIL_MAX}"),
    "breaker_reset_s": Rule(float, lambda v: 0 < v <= GATEWAY_MAX_RESET_S,
                            f"seconds in (0, {GATEWAY_MAX_RESET_S:g}]"),
    TRACE_QUIET_OPERATIONS: QUIET_OPERATIONS_RULE,
}

READERS: Mapping[str, Mapping[str, Rule]] = {
    "broker": BROKER_RULES, "name-server": NAME_SERVER_RULES,
    "trace-collector": TRACE_COLLECTOR_RULES, "gateway-http": GATEWAY_RULES,
}


def setting_name(key: str) -> str | None:
    """The setting a key sets (`/tidemq/config/cluster/c1/retention_hours` → retention_hours),
    or None for a key outside the settings layout."""
    if not key.startswith(SETTINGS_ROOT):
        return None
    parts = key[len(SETTINGS_ROOT):].split("/")
    return parts[2] if len(parts) == 3 and parts[0] in SCOPES and all(parts) else None


def check_setting_write(key: str, value: bytes) -> None:
    """Refuse, before it is written, a value no service that reads this setting would take
    (InvalidArgument, code INVALID_SETTING). Keys outside the layout and settings no service
    reads live are not checked."""
    name = setting_name(key)
    rules = [(service, rules[name]) for service, rules in READERS.items() if name in rules]
    if not rules:
        return
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and any(rule.accepts(text) for _, rule in rules):
        return
    shown = repr(text) if text is not None else f"{len(value)} bytes that are not UTF-8"
    legal = "; ".join(f"{rule.legal} ({service})" for service, rule in rules)
    raise InvalidArgument(f"setting {name}: {shown} is not {legal}; nothing was written",
                          code="INVALID_SETTING")
