"""Turn a parsed filter into a tree of closures over a message's properties.

Each closure takes the properties (a mapping of name to string value) and answers True, False
or None — SQL's UNKNOWN, which is what a comparison with a missing property gives. AND, OR and
NOT follow SQL's three-valued logic (as RocketMQ's LogicExpression does) and a message matches
only when the whole filter is True.

Property values are strings. Compared with a number (or ordered against another property),
a value is read as a number — an integer or a decimal as SQL writes it; a value that is not a
number makes that comparison UNKNOWN. Compared with a string, values are compared as strings;
with TRUE/FALSE, a value is true when it is 'true' in any case (Java's Boolean.valueOf).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping

from tidemq.common.sqlfilter.syntax import (
    And,
    Between,
    Compare,
    Constant,
    In,
    IsNull,
    Not,
    Or,
    Predicate,
    Property,
)

Properties = Mapping[str, str]
Evaluator = Callable[[Properties], "bool | None"]

_OPS = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}
_INT = re.compile(r"[+-]?[0-9]+").fullmatch
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?").fullmatch


def as_number(value: str) -> int | float | None:
    """A property value read as a number, or None when it is not one (so ' 5', '5_0', 'NaN'
    and '0x10' are not)."""
    if value.isdigit() and value.isascii():  # the common case, without a regex
        return int(value)
    if _INT(value):
        return int(value)
    if _DECIMAL(value):
        return float(value)
    return None


def compile_predicate(node: Predicate) -> Evaluator:
    """The closure tree of `node`."""
    if isinstance(node, Constant):
        value = node.value
        return lambda props: value
    if isinstance(node, Compare):
        return _compare(node)
    if isinstance(node, Between):
        return _between(node)
    if isinstance(node, In):
        return _in(node)
    if isinstance(node, IsNull):
        name, negated = node.prop.name, node.negated
        if negated:
            return lambda props: name in props
        return lambda props: name not in props
    if isinstance(node, Not):
        inner = compile_predicate(node.operand)

        def negation(props: Properties) -> bool | None:
            value = inner(props)
            return None if value is None else not value
        return negation
    if isinstance(node, And):
        return _and(tuple(compile_predicate(child) for child in node.operands))
    if isinstance(node, Or):
        return _or(tuple(compile_predicate(child) for child in node.operands))
    raise TypeError(f"not a predicate: {node!r}")


def _compare(node: Compare) -> Evaluator:
    name, op, right = node.left.name, _OPS[node.op], node.right
    if isinstance(right, Property):
        return _compare_properties(name, node.op, right.name)
    if isinstance(right, bool):
        def with_boolean(props: Properties) -> bool | None:
            value = props.get(name)
            return None if value is None else op(value.lower() == "true", right)
        return with_boolean
    if isinstance(right, str):
        def with_string(props: Properties) -> bool | None:
            value = props.get(name)
            return None if value is None else op(value, right)
        return with_string

    def with_number(props: Properties) -> bool | None:
        value = props.get(name)
        if value is None:
            return None
        number = as_number(value)
        return None if number is None else op(number, right)
    return with_number


def _compare_properties(left: str, op_text: str, right: str) -> Evaluator:
    """Two properties: equal as strings; ordered as numbers (RocketMQ converts both to
    doubles, or fails)."""
    op = _OPS[op_text]

    def equal(props: Properties) -> bool | None:
        a, b = props.get(left), props.get(right)
        return None if a is None or b is None else op(a, b)

    def ordered(props: Properties) -> bool | None:
        a, b = props.get(left), props.get(right)
        if a is None or b is None:
            return None
        x, y = as_number(a), as_number(b)
        return None if x is None or y is None else op(x, y)
    return equal if op_text in ("=", "<>") else ordered


def _between(node: Between) -> Evaluator:
    name, low, high, negated = node.prop.name, node.low, node.high, node.negated

    def between(props: Properties) -> bool | None:
        value = props.get(name)
        if value is None:
            return None
        number = as_number(value)
        if number is None:
            return None
        return (low <= number <= high) != negated
    return between


def _in(node: In) -> Evaluator:
    name, values, negated = node.prop.name, node.values, node.negated

    def member(props: Properties) -> bool | None:
        value = props.get(name)
        return None if value is None else (value in values) != negated
    return member


def _and(operands: tuple[Evaluator, ...]) -> Evaluator:
    def conjunction(props: Properties) -> bool | None:
        unknown = False
        for operand in operands:
            value = operand(props)
            if value is False:
                return False
            if value is None:
                unknown = True
        return None if unknown else True
    return conjunction


def _or(operands: tuple[Evaluator, ...]) -> Evaluator:
    def disjunction(props: Properties) -> bool | None:
        unknown = False
        for operand in operands:
            value = operand(props)
            if value is True:
                return True
            if value is None:
                unknown = True
        return None if unknown else False
    return disjunction
