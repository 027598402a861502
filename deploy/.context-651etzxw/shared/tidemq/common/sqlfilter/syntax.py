"""The parsed form of a SQL92 filter: a small tree the compiler turns into closures.

Values are plain Python: `str`, `int`, `float`, `bool`; a property is a `Property`. Every node
is a boolean predicate; comparisons always have a property on the left (the parser flips
`5 < a` into `a > 5`, and folds a comparison of two literals into a `Constant`).
"""

from __future__ import annotations

from dataclasses import dataclass

Literal = str | int | float | bool
FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True, slots=True)
class Property:
    name: str


@dataclass(frozen=True, slots=True)
class Constant:
    value: bool


@dataclass(frozen=True, slots=True)
class Compare:
    """`left op right`: op is one of = <> < <= > >=."""

    left: Property
    op: str
    right: Literal | Property


@dataclass(frozen=True, slots=True)
class Between:
    prop: Property
    low: int | float
    high: int | float
    negated: bool = False


@dataclass(frozen=True, slots=True)
class In:
    prop: Property
    values: frozenset[str]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull:
    prop: Property
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Not:
    operand: Predicate


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Predicate, ...]


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Predicate, ...]


Predicate = Constant | Compare | Between | In | IsNull | Not | And | Or


def properties_of(node: Predicate) -> set[str]:
    """The property names a predicate reads."""
    if isinstance(node, (And, Or)):
        return set().union(*(properties_of(child) for child in node.operands))
    if isinstance(node, Not):
        return properties_of(node.operand)
    if isinstance(node, Compare):
        names = {node.left.name}
        if isinstance(node.right, Property):
            names.add(node.right.name)
        return names
    if isinstance(node, (Between, In, IsNull)):
        return {node.prop.name}
    return set()
