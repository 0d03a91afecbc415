"""cast, the conditionals, the null tests and like: written once over a dialect's
coercions. Each body takes the dialect and the typed arguments and gives SQL;
each `*_kind` gives the Druid type of the result from the arguments. Pure."""

from __future__ import annotations

from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.types import (
    NUMERIC,
    Arg,
    common_kind,
    literal,
    named_type,
)


def cast_kind(a: list[Arg]) -> str:
    return named_type(a[1], "cast", "cast to {} is not supported")


def cast(d: Dialect, a: list[Arg]) -> str:
    return d.cast_to(a[0], cast_kind(a))


def _branches(d: Dialect, args: list[Arg]) -> list[str]:
    kind = common_kind(args)
    return [d.cast_to(x, kind) for x in args]


def coalesce(d: Dialect, a: list[Arg]) -> str:
    return "coalesce(" + ", ".join(_branches(d, a)) + ")"


def if_kind(a: list[Arg]) -> str:
    return common_kind(a[1:])


def if_(d: Dialect, a: list[Arg]) -> str:
    then, other = _branches(d, a[1:])
    return f"(CASE WHEN {d.truth(a[0])} THEN {then} ELSE {other} END)"


def _searched(a: list[Arg]) -> tuple[list[Arg], list[Arg], list[Arg]]:
    """(conditions, results, default or nothing) of case_searched."""
    pairs, rest = a[: len(a) // 2 * 2], a[len(a) // 2 * 2 :]
    return pairs[0::2], pairs[1::2], rest[:1]


def _simple(a: list[Arg]) -> tuple[list[Arg], list[Arg], list[Arg]]:
    """(values to match, results, default or nothing) of case_simple."""
    return _searched(a[1:])


def case_searched_kind(a: list[Arg]) -> str:
    _, results, default = _searched(a)
    return common_kind(results + default)


def case_simple_kind(a: list[Arg]) -> str:
    _, results, default = _simple(a)
    return common_kind(results + default)


def _cases(d: Dialect, tests: list[str], results: list[Arg], default: list[Arg]) -> str:
    values = _branches(d, results + default)
    whens = " ".join(f"WHEN {w} THEN {v}" for w, v in zip(tests, values, strict=False))
    other = f" ELSE {values[-1]}" if default else ""
    return f"(CASE {whens}{other} END)"


def case_searched(d: Dialect, a: list[Arg]) -> str:
    conditions, results, default = _searched(a)
    return _cases(d, [d.truth(x) for x in conditions], results, default)


def case_simple(d: Dialect, a: list[Arg]) -> str:
    values, results, default = _simple(a)
    return _cases(d, [_equals(d, a[0], v) for v in values], results, default)


def _equals(d: Dialect, x: Arg, y: Arg) -> str:
    """case_simple's test: numbers compare as numbers, anything else as text."""
    if x.kind in NUMERIC or y.kind in NUMERIC:
        return f"({d.num(x)} = {d.num(y)})"
    return f"({d.text(x)} = {d.text(y)})"


def isnull(d: Dialect, a: list[Arg]) -> str:
    return d.as_long_bool(f"({a[0].sql} IS NULL)")


def notnull(d: Dialect, a: list[Arg]) -> str:
    return d.as_long_bool(f"({a[0].sql} IS NOT NULL)")


def like(d: Dialect, a: list[Arg]) -> str:
    escape = ""
    if len(a) == 3 and literal(a[2], "the escape", "like") is not None:  # null: none
        escape = f" ESCAPE {d.sql_string(str(a[2].literal))}"
    return d.as_long_bool(f"({d.text(a[0])} LIKE {d.text(a[1])}{escape})")
