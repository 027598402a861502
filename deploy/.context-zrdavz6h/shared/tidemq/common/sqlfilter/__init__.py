"""SQL92 property filters (RocketMQ's `MessageSelector.bySql`), for the broker and the client.

    >>> from tidemq.common.sqlfilter import compile_sql92
    >>> selector = compile_sql92("a > 5 AND b IN ('x', 'y') AND c IS NOT NULL")
    >>> selector.matches({"a": "7", "b": "x", "c": ""})
    True
    >>> selector.matches({"a": "7", "b": "x"})        # c is missing
    False

A filter is parsed once into a tree of closures (`compile_sql92` caches by expression text),
then evaluated per message: over a properties mapping (`matches`) or straight over the
properties as a record stores them (`matches_encoded`), which looks up only the names the
filter reads and never touches the body. Grammar, NULL semantics and limits:
docs/filters.md. No transport here: the broker, the SDK and the gateway share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from tidemq.common.errors import InvalidArgument
from tidemq.common.sqlfilter.compiler import as_number, compile_predicate
from tidemq.common.sqlfilter.parser import MAX_DEPTH, parse
from tidemq.common.sqlfilter.syntax import properties_of
from tidemq.common.sqlfilter.tokens import MAX_EXPRESSION_LENGTH, InvalidFilter

__all__ = [
    "MAX_DEPTH", "MAX_EXPRESSION_LENGTH", "SQL92", "TAG", "InvalidFilter", "SqlFilter",
    "as_number", "compile_sql92", "expression_type",
]

TAG = "TAG"
SQL92 = "SQL92"
EXPRESSION_TYPES = (TAG, SQL92)
COMPILED_CACHE_SIZE = 1024   # distinct expressions kept compiled per process


def expression_type(value: str) -> str:
    """The canonical expression type: "" and any case of "tag" are TAG; "sql92" is SQL92."""
    canonical = (value or TAG).strip().upper()
    if canonical not in EXPRESSION_TYPES:
        raise InvalidArgument(f"expression_type must be TAG or SQL92, got {value!r}",
                              code="INVALID_FILTER")
    return canonical


class SqlFilter:
    """A compiled SQL92 filter. Evaluate with `matches(properties)` or
    `matches_encoded(raw properties of a record)`; a message matches only when the filter is
    TRUE (FALSE and UNKNOWN both skip it)."""

    __slots__ = ("_evaluate", "_needles", "expression", "names")

    def __init__(self, expression: str) -> None:
        tree = parse(expression)
        self.expression = expression
        self.names = tuple(sorted(properties_of(tree)))
        self._needles = tuple((name, name.encode() + b"\x01") for name in self.names)
        self._evaluate = compile_predicate(tree)

    def __repr__(self) -> str:
        return f"SqlFilter({self.expression!r})"

    def matches(self, properties: Mapping[str, str]) -> bool:
        return self._evaluate(properties) is True

    def matches_encoded(self, raw: bytes) -> bool:
        """`matches` over record properties as encoded (`name \\x01 value \\x02 ...`): finds
        only the names the filter reads; a value that is not UTF-8 is read with U+FFFD."""
        found: dict[str, str] = {}
        for name, needle in self._needles:
            at = raw.find(needle)
            while at > 0 and raw[at - 1] != 2:  # a name starts the properties or follows \x02
                at = raw.find(needle, at + 1)
            if at >= 0:
                start = at + len(needle)
                end = raw.find(b"\x02", start)
                found[name] = raw[start:end if end >= 0 else len(raw)].decode(errors="replace")
        return self._evaluate(found) is True


@lru_cache(maxsize=COMPILED_CACHE_SIZE)
def compile_sql92(expression: str) -> SqlFilter:
    """The compiled filter of `expression`, built once per distinct text (LRU cache).
    Raises InvalidFilter (InvalidArgument, code INVALID_FILTER) naming the position."""
    if not isinstance(expression, str):
        raise InvalidArgument("a SQL92 filter must be a string", code="INVALID_FILTER")
    return SqlFilter(expression)
