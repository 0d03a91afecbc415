"""Druid's string functions written once over a dialect: each body takes the
dialect and the arguments as its row in `functions` coerces them (SQL text, or
the typed `Arg` for `any`) and gives SQL. Pure."""

from __future__ import annotations

import re

from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.regex_groups import group_count, may_be_absent
from metastore.druid.expressions.types import NUMERIC, Arg, ExpressionError, int_literal


def concat(d: Dialect, a: list[str]) -> str:
    return d.concat(a) if a else d.null("string")  # null if any argument is null


def format_(d: Dialect, a: list[Arg]) -> str:
    """Java's String.format: a null value prints "null" (a null format is null).
    Spark's format_string is Java's formatter; on an engine whose printf is null
    over a null value, a literal format is cut into its specifiers, each giving
    "null" (with its width and `-`) for a null value."""
    values = [x.sql if x.kind in NUMERIC else d.text(x) for x in a[1:]]
    pieces = None
    if not d.PRINTF_SHOWS_NULL and a[0].is_literal and isinstance(a[0].literal, str):
        pieces = _format_pieces(d, a[0].literal, values)
    if pieces is not None:
        return d.concat(pieces) if pieces else "''"
    return f"{d.sql('printf')}(" + ", ".join([d.text(a[0]), *values]) + ")"


# A java.util.Formatter specifier: %[index$][flags][width][.precision]conversion
_SPECIFIER = re.compile(r"%(\d+\$|<)?([-#+ 0,(]*)(\d+)?(\.\d+)?([tT]?[a-zA-Z%])")


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _format_pieces(d: Dialect, fmt: str, values: list[str]) -> list[str] | None:
    """SQL pieces whose concatenation is Java's String.format(fmt, values...), or None
    where the format needs Java's formatter itself (indexed arguments, too few)."""
    pieces, start, used = [], 0, 0
    for m in _SPECIFIER.finditer(fmt):
        index, flags, width, _, conversion = m.groups()
        if index is not None:
            return None
        pieces.append(_quoted(fmt[start : m.start()]))
        start = m.end()
        if conversion in ("%", "n"):
            pieces.append(_quoted("%" if conversion == "%" else "\n"))
            continue
        if used == len(values):
            return None  # Druid fails: a missing format argument
        value, used = values[used], used + 1
        shown = f"%{'-' if '-' in flags else ''}{width or ''}s"
        spec = _quoted(m.group(0))
        pieces.append(
            f"(CASE WHEN {value} IS NULL THEN {d.sql('printf')}('{shown}', 'null') "
            f"ELSE {d.sql('printf')}({spec}, {value}) END)"
        )
    pieces.append(_quoted(fmt[start:]))
    return [p for p in pieces if p != "''"]


DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def parse_long(d: Dialect, a: list[Arg]) -> str:
    radix = int_literal(a[1], "the radix", "parse_long", 2, 36) if len(a) == 2 else 10
    t = d.sql("radix_subject", d.text(a[0]))
    valid = d.sql("radix_valid", t, f"'^[-+]?[{DIGITS[:radix]}]+$'")
    value = d.sql("radix_value", t, radix)
    minus = d.sql("starts_with", t, "'-'")
    return f"(CASE WHEN NOT {valid} THEN NULL WHEN {minus} THEN - {value} ELSE {value} END)"


def regexp_extract(d: Dialect, a: list[Arg]) -> str:
    """Druid: null when nothing matches, and when the group took no part in the
    match (Java's Matcher.group; the engines give ''); the group is a literal."""
    group = 0
    if len(a) == 3:
        group = int_literal(a[2], "the group index", "regexp_extract", 0, 2**31 - 1)
    pattern = a[1].literal if a[1].is_literal else None
    count = group_count(pattern) if isinstance(pattern, str) else None
    if count is not None and group > count:
        raise ExpressionError(f"regexp_extract(): the pattern has no group {group}")
    t, p = d.text(a[0]), d.text(a[1])
    found = f"regexp_extract({t}, {p}, {group})"
    matches = d.sql("regex_like", t, p)
    if group == 0 or (isinstance(pattern, str) and not may_be_absent(pattern, group)):
        return f"(CASE WHEN {matches} THEN {found} END)"
    taken = d.sql("regex_group_taken", t, p, group)
    return (
        f"(CASE WHEN NOT {matches} THEN NULL WHEN {found} <> '' THEN {found} "
        f"WHEN {taken} THEN '' END)"
    )


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
    if len(a) == 2:
        return d.sql("strpos", *a)
    # Java's indexOf(needle, from): a null start reads as 0, a negative one is 0
    return d.sql("strpos_from", a[0], a[1], f"greatest(coalesce({a[2]}, 0), 0)")


def trim(side: str):
    def emit(d: Dialect, a: list[str]) -> str:
        return d.sql(side, a[0], a[1] if len(a) == 2 else "' '")

    return emit


def pad(side: str):
    def emit(d: Dialect, a: list[str]) -> str:
        return d.sql("pad", *a, side)

    return emit
