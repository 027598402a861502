"""Spark option values: what the `tidemq` source and sink both parse from `.option(...)`
(names case-insensitive, lower-cased by the caller; an empty value is the default)."""

from __future__ import annotations

from tidemq.common.errors import InvalidArgument


def int_option(opts: dict[str, str], name: str, default: int, *, minimum: int) -> int:
    raw = opts.get(name.lower())
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"option {name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise InvalidArgument(f"option {name} must be >= {minimum}, not {value}")
    return value


def bool_option(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None or raw == "":
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise InvalidArgument(f"option {name} must be true or false, not {raw!r}")
