"""A recursive-descent parser for RocketMQ's SQL92 subset (docs/filters.md has the grammar).

    filter     := or END
    or         := and (OR and)*
    and        := not (AND not)*
    not        := NOT not | predicate
    predicate  := '(' or ')' | TRUE | FALSE | operand tail
    tail       := ('=' | '<>' | '<' | '<=' | '>' | '>=') operand
                | [NOT] BETWEEN number AND number
                | [NOT] IN '(' string (',' string)* ')'
                | IS [NOT] NULL
    operand    := property | string | number | TRUE | FALSE

Precedence is SQL's: OR < AND < NOT < comparisons (RocketMQ's JMS grammar binds NOT tighter
than `=`, so there `NOT a = 1` means `(NOT a) = 1`; here it means `NOT (a = 1)`). Type checks
RocketMQ makes when it builds the expression are made here too, at the offending token:
ordering a string or a boolean, comparing with NULL, BETWEEN with low > high.
"""

from __future__ import annotations

from tidemq.common.sqlfilter.syntax import (
    FLIPPED,
    And,
    Between,
    Compare,
    Constant,
    In,
    IsNull,
    Literal,
    Not,
    Or,
    Predicate,
    Property,
)
from tidemq.common.sqlfilter.tokens import InvalidFilter, Kind, Token, tokenize

MAX_DEPTH = 64   # nested parentheses and NOTs; deeper is INVALID_FILTER (no recursion error)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_COMPARISONS = frozenset(FLIPPED)
_ORDERINGS = frozenset({"<", "<=", ">", ">="})
_TAIL = "a comparison (=, <>, <, <=, >, >=), BETWEEN, IN or IS"


class _Null:
    """The NULL literal while parsing: only `IS [NOT] NULL` accepts it."""


_NULL = _Null()
Operand = Literal | Property | _Null


def parse(expression: str) -> Predicate:
    """The predicate tree of `expression`; InvalidFilter with position and expectation."""
    return _Parser(expression).parse()


class _Parser:
    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = tokenize(expression)
        self.at = 0
        self.depth = 0

    # -- token helpers -----------------------------------------------------------------------

    @property
    def token(self) -> Token:
        return self.tokens[self.at]

    def _is(self, kind: Kind, text: str | None = None) -> bool:
        token = self.tokens[self.at]
        return token.kind is kind and (text is None or token.text == text)

    def _take(self) -> Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def _error(self, expected: str, token: Token | None = None) -> InvalidFilter:
        token = token or self.token
        return InvalidFilter(self.expression, token.position, expected, token.describe())

    def _expect(self, kind: Kind, text: str, expected: str) -> Token:
        if not self._is(kind, text):
            raise self._error(expected)
        return self._take()

    # -- grammar -----------------------------------------------------------------------------

    def parse(self) -> Predicate:
        if self._is(Kind.END):
            raise self._error("a condition (an empty SQL92 filter matches nothing)")
        node = self._or()
        if not self._is(Kind.END):
            raise self._error("AND, OR or the end of the expression")
        return node

    def _or(self) -> Predicate:
        operands = [self._and()]
        while self._is(Kind.KEYWORD, "OR"):
            self._take()
            operands.append(self._and())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def _and(self) -> Predicate:
        operands = [self._not()]
        while self._is(Kind.KEYWORD, "AND"):
            self._take()
            operands.append(self._not())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def _not(self) -> Predicate:
        if not self._is(Kind.KEYWORD, "NOT"):
            return self._predicate()
        self._nest()
        self._take()
        node = Not(self._not())
        self.depth -= 1
        return node

    def _nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self._error(f"at most {MAX_DEPTH} nested parentheses and NOTs")

    def _predicate(self) -> Predicate:
        if self._is(Kind.SYMBOL, "("):
            opening = self._take()
            self._nest()
            node = self._or()
            if not self._is(Kind.SYMBOL, ")"):
                raise self._error(f"AND, OR or ')' to close the '(' at position "
                                  f"{opening.position}")
            self._take()
            self.depth -= 1
            return node
        start = self.token
        left = self._operand("a condition: a property, a literal, NOT or '('")
        if self._is(Kind.SYMBOL) and self.token.text in _COMPARISONS:
            op = self._take().text
            right_token = self.token
            right = self._operand(f"a property or a literal after {op!r}")
            return self._compare(left, start, op, right, right_token)
        if isinstance(left, bool) and not self._is(Kind.KEYWORD, "IS"):
            return Constant(left)
        negated = self._is(Kind.KEYWORD, "NOT")
        if negated:
            self._take()
            if not (self._is(Kind.KEYWORD, "BETWEEN") or self._is(Kind.KEYWORD, "IN")):
                raise self._error("BETWEEN or IN after NOT")
        elif not (self._is(Kind.KEYWORD) and self.token.text in ("BETWEEN", "IN", "IS")):
            raise self._error(f"{_TAIL} after {start.describe()}")
        keyword = self._take()
        if not isinstance(left, Property):
            raise self._error(f"a property before {keyword.text}", start)
        if keyword.text == "BETWEEN":
            return self._between(left, negated)
        if keyword.text == "IN":
            return self._in(left, negated)
        is_not = self._is(Kind.KEYWORD, "NOT")
        if is_not:
            self._take()
        self._expect(Kind.KEYWORD, "NULL", "NULL after IS NOT" if is_not else "NULL or NOT NULL after IS")
        return IsNull(left, is_not)

    def _operand(self, expected: str) -> Operand:
        token = self.token
        if token.kind is Kind.IDENT:
            self._take()
            return Property(token.text)
        if token.kind is Kind.STRING:
            self._take()
            return token.text
        if token.kind is Kind.KEYWORD and token.text in ("TRUE", "FALSE", "NULL"):
            self._take()
            return _NULL if token.text == "NULL" else token.text == "TRUE"
        if token.kind is Kind.SYMBOL and token.text in "+-" or token.kind in (Kind.INT,
                                                                             Kind.FLOAT):
            return self._number()
        raise self._error(expected)

    def _number(self) -> int | float:
        sign = 1
        if self._is(Kind.SYMBOL, "-") or self._is(Kind.SYMBOL, "+"):
            sign = -1 if self._take().text == "-" else 1
        token = self.token
        if token.kind is Kind.FLOAT:
            self._take()
            return sign * float(token.text)
        if token.kind is not Kind.INT:
            raise self._error("a number")
        self._take()
        value = sign * int(token.text)
        if not _INT64[0] <= value <= _INT64[1]:
            raise self._error("an integer within 64 bits (use a decimal for larger values)",
                              token)
        return value

    # -- node builders with RocketMQ's type checks ------------------------------------------

    def _compare(self, left: Operand, left_token: Token, op: str, right: Operand,
                 right_token: Token) -> Predicate:
        for value, token in ((left, left_token), (right, right_token)):
            if value is _NULL:
                raise self._error("a value (compare with NULL by IS NULL or IS NOT NULL)",
                                  token)
            if op in _ORDERINGS and not isinstance(value, Property) and not _is_number(value):
                raise self._error(f"a number or a property on each side of {op!r} (strings "
                                  "and booleans cannot be ordered)", token)
        if isinstance(left, Property):
            return Compare(left, op, right)
        if isinstance(right, Property):
            return Compare(right, FLIPPED[op], left)
        return Constant(self._fold(left, op, right, right_token))

    def _fold(self, left: Literal, op: str, right: Literal, right_token: Token) -> bool:
        """A comparison of two literals, decided now (`1 = 1` is a common match-all)."""
        if _is_number(left) and _is_number(right):
            return {"=": left == right, "<>": left != right, "<": left < right,
                    "<=": left <= right, ">": left > right, ">=": left >= right}[op]
        if type(left) is not type(right):
            raise self._error(f"a literal of the same type as {left!r}", right_token)
        return (left == right) == (op == "=")

    def _between(self, prop: Property, negated: bool) -> Predicate:
        low_token = self.token
        low = self._number()
        self._expect(Kind.KEYWORD, "AND", "AND between the bounds of BETWEEN")
        high = self._number()
        if low > high:
            raise self._error(f"a lower bound no greater than the upper bound {high}",
                              low_token)
        return Between(prop, low, high, negated)

    def _in(self, prop: Property, negated: bool) -> Predicate:
        self._expect(Kind.SYMBOL, "(", "'(' after IN")
        values = []
        while True:
            if not self._is(Kind.STRING):
                raise self._error("a string literal in the IN list")
            values.append(self._take().text)
            if self._is(Kind.SYMBOL, ")"):
                self._take()
                return In(prop, frozenset(values), negated)
            self._expect(Kind.SYMBOL, ",", "',' or ')' in the IN list")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
