"""Parsing and formatting for the query API and dashboard (pure functions, no Flask)."""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from datetime import UTC, datetime

from tidemq.common.errors import InvalidArgument
from tidemq.tracecollector.search import TraceQuery

DEFAULT_LIMIT = 20
MAX_LIMIT = 1000
MAX_FILTER_CHARS = 256
SERVICE_PALETTE_SIZE = 10
_RELATIVE_RE = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_limit(text: str | None) -> int:
    if text is None or text == "":
        return DEFAULT_LIMIT
    try:
        limit = int(text)
    except ValueError:
        raise InvalidArgument(f"limit must be an integer, got {text[:32]!r}") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def parse_since(text: str | None, now_ns: int) -> int:
    """`since` as Unix seconds, an ISO-8601 time, or a look-back like 15m / 2h / 1d → ns."""
    if text is None or text.strip() == "":
        return 0
    value = text.strip()
    relative = _RELATIVE_RE.match(value)
    if relative:
        return now_ns - int(float(relative.group(1)) * _UNIT_SECONDS[relative.group(2)] * 1e9)
    try:
        return int(float(value) * 1e9)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(
            f"since must be Unix seconds, an ISO-8601 time or a look-back like 15m, 2h, 1d; "
            f"got {value[:64]!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1e9)


def format_duration(ns: int) -> str:
    if ns == 0:
        return "0"
    if ns < 1_000:
        return f"{ns} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.3g} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.3g} ms"
    return f"{ns / 1e9:.3g} s"


def format_time(ns: int) -> str:
    moment = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def service_colours(all_services: list[str]) -> dict[str, int]:
    """Palette slot per service: distinct for the first ten services, the same on every page
    (slots follow the sorted list of all known services, not the services of one trace)."""
    return {name: index % SERVICE_PALETTE_SIZE for index, name in enumerate(sorted(all_services))}


def service_colour(service: str, colours: dict[str, int] | None = None) -> int:
    """Slot from `colours`, else a stable hash (for services the map does not know yet)."""
    if colours and service in colours:
        return colours[service]
    return zlib.crc32(service.encode()) % SERVICE_PALETTE_SIZE


def parse_flag(name: str, text: str | None) -> bool:
    value = (text or "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise InvalidArgument(f"{name} must be true or false, got {value[:16]!r}")


def parse_trace_query(args: Mapping[str, str], now_ns: int, default_limit: int = DEFAULT_LIMIT,
                      ) -> TraceQuery:
    """The search parameters of `/api/traces` and the dashboard (empty ones do not filter)."""
    def text(name: str) -> str | None:
        value = (args.get(name) or "").strip()
        if len(value) > MAX_FILTER_CHARS:
            raise InvalidArgument(f"{name} must be at most {MAX_FILTER_CHARS} characters")
        return value or None

    since_ns = parse_since(args.get("since"), now_ns)
    until_ns = parse_since(args.get("until"), now_ns) if args.get("until") else 0
    if until_ns and until_ns <= since_ns:
        raise InvalidArgument("until must be after since")
    return TraceQuery(
        msg_id=text("msg_id"), unique_id=text("unique_id"), key=text("key"),
        topic=text("topic"), group=text("group"), service=text("service"),
        errors_only=parse_flag("errors", args.get("errors")),
        internal=parse_flag("internal", args.get("internal")), since_ns=since_ns,
        until_ns=until_ns,
        limit=parse_limit(args.get("limit") or str(default_limit)),
    )


def format_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
