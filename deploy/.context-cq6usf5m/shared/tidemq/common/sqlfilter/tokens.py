"""The SQL92 filter's tokens: what the parser reads, each with its position in the text.

The spelling follows RocketMQ's selector grammar (filter/SelectorParser.jj): keywords in any
case, identifiers `[A-Za-z_$][A-Za-z0-9_$]*`, strings in single quotes with `''` for a quote,
integers and decimals with an optional exponent.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from tidemq.common.errors import InvalidArgument

MAX_EXPRESSION_LENGTH = 4096   # characters; longer is INVALID_FILTER (docs/filters.md)
KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE"})


class InvalidFilter(InvalidArgument):
    """A filter expression that does not parse or cannot be evaluated as written.

    `position` is the 0-based character index in the expression where the problem is, and
    `expected` says what would have been valid there."""

    code = "INVALID_FILTER"

    def __init__(self, expression: str, position: int, expected: str, found: str = "") -> None:
        found_part = f", found {found}" if found else ""
        super().__init__(f"bad SQL92 filter {expression!r} at position {position}: "
                         f"expected {expected}{found_part}")
        self.expression, self.position, self.expected = expression, position, expected


class Kind(enum.Enum):
    IDENT = "a property name"
    STRING = "a string"
    INT = "an integer"
    FLOAT = "a decimal number"
    KEYWORD = "a keyword"
    SYMBOL = "a symbol"
    END = "the end of the expression"


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    text: str        # keywords upper-cased; strings decoded ('' -> ')
    position: int    # index of its first character in the expression

    def describe(self) -> str:
        if self.kind is Kind.END:
            return Kind.END.value
        if self.kind is Kind.STRING:
            return f"string '{self.text}'"
        return f"{self.kind.value} {self.text!r}" if self.kind is not Kind.SYMBOL \
            else repr(self.text)


_TOKEN = re.compile(r"""
      (?P<space>\s+)
    | (?P<float>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
    | (?P<int>[0-9]+)[lL]?
    | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
    | (?P<string>'(?:''|[^'])*')
    | (?P<symbol><>|<=|>=|!=|[=<>(),+-])
""", re.VERBOSE)


def tokenize(expression: str) -> list[Token]:
    """The tokens of `expression`, ending with one END token; InvalidFilter where no token
    can start."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise InvalidFilter(expression[:40] + "...", MAX_EXPRESSION_LENGTH,
                            f"at most {MAX_EXPRESSION_LENGTH} characters")
    tokens: list[Token] = []
    pos, size = 0, len(expression)
    while pos < size:
        match = _TOKEN.match(expression, pos)
        if match is None:
            if expression[pos] == "'":
                raise InvalidFilter(expression, pos, "a closing quote for this string")
            raise InvalidFilter(expression, pos, "a property (letters, digits, _ and $), a "
                                "literal, an operator or a parenthesis", f"{expression[pos]!r}")
        kind = match.lastgroup
        if kind == "word":
            word = match.group(kind)
            upper = word.upper()
            tokens.append(Token(Kind.KEYWORD, upper, pos) if upper in KEYWORDS
                          else Token(Kind.IDENT, word, pos))
        elif kind == "string":
            tokens.append(Token(Kind.STRING, match.group(kind)[1:-1].replace("''", "'"), pos))
        elif kind == "int":
            tokens.append(Token(Kind.INT, match.group(kind), pos))
        elif kind == "float":
            tokens.append(Token(Kind.FLOAT, match.group(kind), pos))
        elif kind == "symbol":
            if match.group(kind) == "!=":
                raise InvalidFilter(expression, pos, "'<>' (SQL's not-equal)", "'!='")
            tokens.append(Token(Kind.SYMBOL, match.group(kind), pos))
        pos = match.end()
    tokens.append(Token(Kind.END, "", size))
    return tokens
