"""Hypothesis: the compiled SQL92 filter agrees with a direct evaluation of the same tree.

Random predicate trees are rendered to SQL text (random keyword case, spacing, literals on
either side, only the parentheses precedence needs plus random extra ones) and evaluated here,
independently of the compiler, with SQL's three-valued logic; random property maps are matched
through both entry points (`matches` and `matches_encoded` over the record encoding).
"""

from __future__ import annotations

import math
import operator

from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.common import record
from tidemq.common.sqlfilter import InvalidFilter, SqlFilter

NAMES = ["a", "b", "c", "TAGS", "x_1", "$y", "price"]
VALUES = ["0", "1", "-1", "+2", "7", "007", "2.5", ".5", "5.", "1e3", "-1.5E-2", "10", "x", "y",
          "", " ", "true", "TRUE", "False", "1 ", "abc", "1_0", "NaN", "it's", "\u00e9"]
OPS = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le,
       ">": operator.gt, ">=": operator.ge}
FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
PRECEDENCE = {"or": 1, "and": 2, "not": 3}   # leaves bind tightest (4)

# -- the reference semantics ----------------------------------------------------------------


def number(value: str):
    """A property value as a number, written independently of the compiler's regexes."""
    if not value or value != value.strip() or not value.isascii():
        return None
    digits = value[1:] if value[0] in "+-" else value
    if digits.isdigit():
        return int(value)
    if any(ch not in "0123456789.eE+-" for ch in digits):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def reference(node, props):
    """True, False or None (UNKNOWN) for a tree node."""
    kind = node[0]
    if kind == "const":
        return node[1]
    if kind in ("and", "or"):
        values = [reference(child, props) for child in node[1]]
        decisive = kind == "or"  # OR: any TRUE decides; AND: any FALSE decides
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if kind == "not":
        value = reference(node[1], props)
        return None if value is None else not value
    name = node[1]
    value = props.get(name)
    if kind == "isnull":
        return (value is None) != node[2]
    if value is None:
        return None
    if kind == "in":
        return (value in node[2]) != node[3]
    if kind == "between":
        n = number(value)
        return None if n is None else (node[2] <= n <= node[3]) != node[4]
    op, right = OPS[node[2]], node[3]
    if kind == "propcmp":
        other = props.get(right)
        if other is None:
            return None
        if node[2] in ("=", "<>"):
            return op(value, other)
        x, y = number(value), number(other)
        return None if x is None or y is None else op(x, y)
    if isinstance(right, bool):
        return op(value.lower() == "true", right)
    if isinstance(right, str):
        return op(value, right)
    n = number(value)
    return None if n is None else op(n, right)


# -- rendering ---------------------------------------------------------------------------


def kw(draw, word: str) -> str:
    return draw(st.sampled_from([word, word.lower(), word.capitalize()]))


def sp(draw) -> str:
    return draw(st.sampled_from([" ", "  ", "\n", "\t "]))


def literal(value) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def render(draw, node, parent: int = 0) -> str:
    kind = node[0]
    level = PRECEDENCE.get(kind, 4)
    if kind in ("and", "or"):
        glue = sp(draw) + kw(draw, kind.upper()) + sp(draw)
        text = glue.join(render(draw, child, level) for child in node[1])
    elif kind == "not":
        text = kw(draw, "NOT") + sp(draw) + render(draw, node[1], level)
    elif kind == "const":
        text = kw(draw, literal(node[1]))
    elif kind == "isnull":
        text = node[1] + sp(draw) + kw(draw, "IS") + sp(draw) + (
            kw(draw, "NOT") + sp(draw) if node[2] else "") + kw(draw, "NULL")
    elif kind == "in":
        items = sorted(node[2])
        text = node[1] + sp(draw) + (kw(draw, "NOT") + sp(draw) if node[3] else "") + \
            kw(draw, "IN") + " (" + ", ".join(literal(i) for i in items) + ")"
    elif kind == "between":
        text = (node[1] + sp(draw) + (kw(draw, "NOT") + sp(draw) if node[4] else "")
                + kw(draw, "BETWEEN") + sp(draw) + literal(node[2]) + sp(draw)
                + kw(draw, "AND") + sp(draw) + literal(node[3]))
    elif kind == "propcmp":
        text = f"{node[1]}{sp(draw)}{node[2]}{sp(draw)}{node[3]}"
    else:  # cmp: the literal on either side
        if draw(st.booleans()):
            text = f"{node[1]}{sp(draw)}{node[2]}{sp(draw)}{literal(node[3])}"
        else:
            text = f"{literal(node[3])}{sp(draw)}{FLIP[node[2]]}{sp(draw)}{node[1]}"
    if level <= parent or draw(st.integers(0, 5)) == 0:
        return f"({text})"
    return text


# -- trees --------------------------------------------------------------------------------

names = st.sampled_from(NAMES)
ints = st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-12, 12)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64).filter(
    lambda f: not math.isinf(float(repr(f)))) | st.sampled_from([0.5, 2.5, -1.5, 1000.0])
numbers = ints | floats
strings = st.text(st.characters(blacklist_categories=("Cs",),
                                blacklist_characters="\x01\x02"), max_size=6) | st.sampled_from(
    VALUES)


@st.composite
def comparisons(draw):
    op = draw(st.sampled_from(list(OPS)))
    right = draw(numbers | strings | st.booleans()) if op in ("=", "<>") else draw(numbers)
    return ("cmp", draw(names), op, right)


@st.composite
def betweens(draw):
    low, high = sorted([draw(numbers), draw(numbers)])
    return ("between", draw(names), low, high, draw(st.booleans()))


leaves = (comparisons() | betweens()
          | st.tuples(st.just("in"), names, st.frozensets(strings, min_size=1, max_size=4),
                      st.booleans())
          | st.tuples(st.just("isnull"), names, st.booleans())
          | st.tuples(st.just("propcmp"), names, st.sampled_from(list(OPS)), names)
          | st.tuples(st.just("const"), st.booleans()))
trees = st.recursive(
    leaves,
    lambda children: (st.tuples(st.sampled_from(["and", "or"]),
                                st.lists(children, min_size=2, max_size=4).map(tuple))
                      | st.tuples(st.just("not"), children)),
    max_leaves=12)
property_maps = st.dictionaries(names, strings | st.sampled_from(VALUES), max_size=len(NAMES))


@st.composite
def rendered(draw):
    tree = draw(trees)
    return tree, render(draw, tree)


@settings(max_examples=600, deadline=None)
@given(rendered(), st.lists(property_maps, min_size=1, max_size=6))
def test_compiled_filter_agrees_with_the_reference(case, maps):
    tree, text = case
    selector = SqlFilter(text)
    for props in maps:
        expected = reference(tree, props) is True
        assert selector.matches(props) is expected, (text, props)
        assert selector.matches_encoded(record.encode_properties(props)) is expected, (text, props)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab1'() =<>,.-+") + [" AND ", " OR ", " NOT ", " IN ",
                                                         " IS ", " NULL ", " BETWEEN "]),
                max_size=20).map("".join))
def test_any_text_parses_or_fails_with_a_position(text):
    try:
        SqlFilter(text)
    except InvalidFilter as error:
        assert 0 <= error.position <= len(text) and error.expected
