"""The SQL92 filter on examples: RocketMQ's semantics, precedence, NULLs and precise errors."""

from __future__ import annotations

import pytest
from tidemq.common import record
from tidemq.common.errors import InvalidArgument
from tidemq.common.sqlfilter import (
    MAX_DEPTH,
    MAX_EXPRESSION_LENGTH,
    InvalidFilter,
    SqlFilter,
    as_number,
    compile_sql92,
    expression_type,
)

ORDER = {"a": "7", "b": "x", "c": "", "price": "12.5", "region": "eu", "flag": "TRUE"}


def matches(expression: str, properties: dict[str, str]) -> bool:
    selector = SqlFilter(expression)
    by_map = selector.matches(properties)
    by_bytes = selector.matches_encoded(record.encode_properties(properties))
    assert by_map == by_bytes, expression
    return by_map


@pytest.mark.parametrize(("expression", "expected"), [
    ("a > 5 AND b IN ('x','y') AND c IS NOT NULL", True),
    ("a > 5 AND b IN ('x','y') AND d IS NOT NULL", False),
    ("a = 7", True), ("a = 7.0", True), ("a <> 7", False), ("a >= 7", True), ("a < 7", False),
    ("7 = a", True), ("5 < a", True), ("5 > a", False),
    ("price > 12", True), ("price BETWEEN 12 AND 13", True), ("price NOT BETWEEN 12 AND 13", False),
    ("a BETWEEN 7 AND 7", True), ("a BETWEEN -1.5 AND 6.99", False),
    ("b = 'x'", True), ("b <> 'x'", False), ("b = 'X'", False), ("region NOT IN ('us')", True),
    ("flag = TRUE", True), ("flag = FALSE", False), ("b = FALSE", True),
    ("TRUE", True), ("FALSE", False), ("NOT FALSE", True), ("1 = 1", True), ("'x' <> 'x'", False),
    ("c = ''", True), ("c IS NULL", False), ("missing IS NULL", True),
    ("a = b", False), ("a = a", True), ("a < price", True), ("b < price", False),
    ("a > -8 and b in ('x') or zz = 1", True),   # keywords in any case
    ("a = 7L", True),                              # Java long suffix, as RocketMQ lexes it
    ("TAGS = 'eu'", False),
])
def test_examples(expression, expected):
    assert matches(expression, ORDER) is expected


@pytest.mark.parametrize("expression", [
    "missing = 1", "missing <> 1", "missing > 1", "missing = 'x'", "missing <> 'x'",
    "missing IN ('x')", "missing NOT IN ('x')", "missing BETWEEN 1 AND 2",
    "missing NOT BETWEEN 1 AND 2", "NOT (missing = 1)", "missing = a", "missing = TRUE",
])
def test_a_comparison_with_a_missing_property_never_matches(expression):
    """UNKNOWN, not FALSE: its negation does not match either (RocketMQ: null)."""
    assert matches(expression, ORDER) is False


@pytest.mark.parametrize(("expression", "expected"), [
    ("missing = 1 OR a = 7", True),       # UNKNOWN OR TRUE = TRUE
    ("missing = 1 OR a = 8", False),      # UNKNOWN OR FALSE = UNKNOWN
    ("missing = 1 AND a = 8", False),     # UNKNOWN AND FALSE = FALSE ...
    ("NOT (missing = 1 AND a = 8)", True),  # ... so its negation is TRUE
    ("NOT (missing = 1 AND a = 7)", False),  # UNKNOWN AND TRUE = UNKNOWN
    ("NOT (missing = 1 OR a = 8)", False),
])
def test_three_valued_logic(expression, expected):
    assert matches(expression, ORDER) is expected


@pytest.mark.parametrize("expression", ["b > 1", "b = 1", "b BETWEEN 0 AND 9", "b <> 1",
                                        "NOT (b = 1)"])
def test_a_value_that_is_not_a_number_compared_with_a_number_is_unknown(expression):
    assert matches(expression, ORDER) is False


@pytest.mark.parametrize(("value", "number"), [
    ("5", 5), ("-5", -5), ("+5", 5), ("007", 7), ("5.", 5.0), (".5", 0.5), ("1e3", 1000.0),
    ("-1.5E-2", -0.015), (" 5", None), ("5 ", None), ("5_0", None), ("NaN", None),
    ("Infinity", None), ("0x10", None), ("", None), ("²", None), ("١", None), ("1e", None),
])
def test_as_number(value, number):
    assert as_number(value) == number and type(as_number(value)) is type(number)


@pytest.mark.parametrize(("text", "same_as"), [
    ("a = 1 OR b = 'x' AND c = 'z'", "a = 1 OR (b = 'x' AND c = 'z')"),
    ("NOT a = 1 AND b = 'x'", "(NOT (a = 1)) AND b = 'x'"),
    ("NOT NOT a = 7", "a = 7"),
    ("a = 1 AND b = 'x' OR c = ''", "(a = 1 AND b = 'x') OR c = ''"),
])
@pytest.mark.parametrize("a", ["1", "7"])
@pytest.mark.parametrize("b", ["x", "y"])
@pytest.mark.parametrize("c", ["", "z"])
def test_precedence(text, same_as, a, b, c):
    properties = {"a": a, "b": b, "c": c}
    assert matches(text, properties) == matches(same_as, properties)


def test_precedence_or_below_and():
    # were OR to bind tighter, (a = 1 OR b = 'x') AND c = 'z' would be false here
    assert matches("a = 1 OR b = 'x' AND c = 'z'", {"a": "1", "b": "x", "c": ""})


def test_strings_keep_quotes_spaces_and_case():
    assert matches("b = 'it''s a B'", {"b": "it's a B"})
    assert not matches("b = 'it''s a b'", {"b": "it's a B"})
    assert matches("b IN ('', ' ')", {"b": " "})


@pytest.mark.parametrize(("expression", "position", "expected"), [
    ("", 0, "a condition"),
    ("a >", 3, "a property or a literal after '>'"),
    ("a > 'x'", 4, "strings and booleans cannot be ordered"),
    ("a <= TRUE", 5, "strings and booleans cannot be ordered"),
    ("a = NULL", 4, "IS NULL"),
    ("(a = 1", 6, "')' to close the '(' at position 0"),
    ("((a = 1) AND (b = 2)", 20, "')' to close the '(' at position 0"),
    ("a = 1)", 5, "AND, OR or the end"),
    ("a BETWEEN 5 AND 1", 10, "lower bound"),
    ("a BETWEEN 'x' AND 'y'", 10, "a number"),
    ("a BETWEEN 1 OR 2", 12, "AND between the bounds"),
    ("a IN (1)", 6, "a string literal"),
    ("a IN 'x'", 5, "'(' after IN"),
    ("a IN ('x' 'y')", 10, "',' or ')'"),
    ("a NOT LIKE 'x'", 6, "BETWEEN or IN after NOT"),
    ("a", 1, "a comparison"),
    ("a b", 2, "a comparison"),
    ("a != 1", 2, "'<>'"),
    ("a = 1 b", 6, "AND, OR or the end"),
    ("a = 'x", 4, "a closing quote"),
    ("a = 1 AND", 9, "a condition"),
    ("a = # 1", 4, "a property"),
    ("'x' IS NULL", 0, "a property before IS"),
    ("5 IN ('x')", 0, "a property before IN"),
    ("a IS FOO", 5, "NULL or NOT NULL"),
    ("1 = 'x'", 4, "same type"),
    ("a = 9223372036854775808", 4, "64 bits"),
    ("a = -", 5, "a number"),
    ("region.code = 'x'", 6, "letters, digits, _ and $"),
])
def test_errors_name_position_and_expectation(expression, position, expected):
    with pytest.raises(InvalidFilter) as caught:
        SqlFilter(expression)
    error = caught.value
    assert isinstance(error, InvalidArgument) and error.code == "INVALID_FILTER"
    assert error.position == position, str(error)
    assert expected in error.expected, str(error)
    assert f"at position {position}" in str(error)


def test_limits():
    deep = "NOT " * MAX_DEPTH + "a = 1"
    assert matches(deep, {"a": "1"}) is (MAX_DEPTH % 2 == 0)
    with pytest.raises(InvalidFilter, match="nested"):
        SqlFilter("NOT " * (MAX_DEPTH + 1) + "a = 1")
    with pytest.raises(InvalidFilter, match="nested"):
        SqlFilter("(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1))
    with pytest.raises(InvalidFilter, match="characters"):
        SqlFilter("a = 1 OR " * (MAX_EXPRESSION_LENGTH // 9) + "a = 1")
    long_chain = " OR ".join(f"a = {i}" for i in range(350))  # flat, no recursion per term
    assert len(long_chain) < MAX_EXPRESSION_LENGTH and matches(long_chain, {"a": "349"})


def test_compiled_once_per_expression():
    assert compile_sql92("a = 1") is compile_sql92("a = 1")
    assert compile_sql92("a = 1").names == ("a",)
    assert compile_sql92("a = 1 AND b IS NULL OR TAGS IN ('x')").names == ("TAGS", "a", "b")


def test_encoded_lookup_finds_whole_names_only():
    """`a` must not be found inside `ba` or inside a value."""
    selector = SqlFilter("a = 'hit'")
    assert not selector.matches_encoded(record.encode_properties({"ba": "hit"}))
    assert not selector.matches_encoded(record.encode_properties({"x": "a\u0001"[:1] + "hit"}))
    assert selector.matches_encoded(record.encode_properties({"ba": "no", "a": "hit"}))
    assert selector.matches_encoded(b"a\x01hit")  # the last value may lack its separator
    assert not selector.matches_encoded(b"")


@pytest.mark.parametrize(("given", "canonical"), [("", "TAG"), ("tag", "TAG"), ("TAG", "TAG"),
                                                  ("sql92", "SQL92"), (" SQL92 ", "SQL92")])
def test_expression_type(given, canonical):
    assert expression_type(given) == canonical


def test_unknown_expression_type():
    with pytest.raises(InvalidArgument) as caught:
        expression_type("SQL")
    assert caught.value.code == "INVALID_FILTER"
