"""The parse tree of a Druid expression: immutable, typed, engine-neutral.

`metastore.druid.expressions.parse` builds it; the emitters (Spark SQL for
ingestion, DuckDB SQL for native queries) walk it. Pure: no Spark or Django import.
"""

from __future__ import annotations

from dataclasses import dataclass


class Expr:
    """A node of the tree."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class LongLiteral(Expr):
    value: int


@dataclass(frozen=True, slots=True)
class DoubleLiteral(Expr):
    value: float
    text: str  # as written (`1.50`, `1e3`, `NaN`, `-Infinity`), for exact emission


@dataclass(frozen=True, slots=True)
class StringLiteral(Expr):
    value: str


@dataclass(frozen=True, slots=True)
class NullLiteral(Expr):
    pass


@dataclass(frozen=True, slots=True)
class ArrayLiteral(Expr):
    """`[1, 2]`, `<DOUBLE>[1]`, `ARRAY<STRING>['a']`: elements are literals."""

    element_type: str | None  # LONG, DOUBLE, STRING, ARRAY<...>, COMPLEX<...>; None: inferred
    elements: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Identifier(Expr):
    """A column (or, inside a lambda's body, one of its parameters)."""

    name: str


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    op: str  # "-" or "!"
    operand: Expr


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    op: str  # ^ * / % + - < <= > >= == != && ||
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Lambda(Expr):
    params: tuple[str, ...]
    body: Expr


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """A function call; `name` is lower-cased (Strata reads function names in any
    case). For the apply functions (map, fold...) the first argument is a Lambda."""

    name: str
    args: tuple[Expr, ...]


LITERALS = (LongLiteral, DoubleLiteral, StringLiteral, NullLiteral)


def literal_value(node: Expr):
    """The Python value of a literal node (None for null)."""
    return None if isinstance(node, NullLiteral) else node.value
