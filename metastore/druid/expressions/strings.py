"""Druid's string functions written once over a dialect: each body takes the
dialect and the arguments as its row in `functions` coerces them (SQL text, or
the typed `Arg` for `any`) and gives SQL. Pure."""

from __future__ import annotations

from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.types import NUMERIC, Arg, int_literal


def concat(d: Dialect, a: list[str]) -> str:
    return d.concat(a) if a else d.null("string")  # null if any argument is null


def format_(d: Dialect, a: list[Arg]) -> str:
    values = [x.sql if x.kind in NUMERIC else d.text(x) for x in a[1:]]
    return f"{d.sql('printf')}(" + ", ".join([d.text(a[0]), *values]) + ")"


DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def parse_long(d: Dialect, a: list[Arg]) -> str:
    radix = int_literal(a[1], "the radix", "parse_long", 2, 36) if len(a) == 2 else 10
    t = d.sql("radix_subject", d.text(a[0]))
    valid = d.sql("radix_valid", t, f"'^[-+]?[{DIGITS[:radix]}]+$'")
    value = d.sql("radix_value", t, radix)
    minus = d.sql("starts_with", t, "'-'")
    return f"(CASE WHEN NOT {valid} THEN NULL WHEN {minus} THEN - {value} ELSE {value} END)"


def regexp_extract(d: Dialect, a: list[str]) -> str:
    t, p = a[0], a[1]
    index = d.sql("int_arg", a[2]) if len(a) == 3 else "0"
    # Druid: null when there is no match (the engines give '')
    return f"(CASE WHEN {d.sql('regex_like', t, p)} THEN regexp_extract({t}, {p}, {index}) END)"


def regexp_like(d: Dialect, a: list[str]) -> str:
    return d.as_long_bool(d.sql("regex_like", *a))


def substring(d: Dialect, a: list[str]) -> str:
    # 0-based index; a negative length means "to the end"
    t, i, n = a
    f = d.sql("substr")
    return f"(CASE WHEN {n} < 0 THEN {f}({t}, {i} + 1) ELSE {f}({t}, {i} + 1, {n}) END)"


def left(d: Dialect, a: list[str]) -> str:
    return f"left({a[0]}, {d.sql('int_arg', a[1])})"


def right(d: Dialect, a: list[str]) -> str:
    return f"right({a[0]}, {d.sql('int_arg', a[1])})"


def strpos(d: Dialect, a: list[str]) -> str:
    return d.sql("strpos_from" if len(a) == 3 else "strpos", *a)


def trim(side: str):
    def emit(d: Dialect, a: list[str]) -> str:
        return d.sql(side, a[0], a[1] if len(a) == 2 else "' '")

    return emit


def pad(side: str):
    def emit(d: Dialect, a: list[str]) -> str:
        return d.sql("pad", *a, side)

    return emit
