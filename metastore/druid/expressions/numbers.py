"""Druid's math, IPv4 and human-readable-size functions written once over a
dialect (bodies as in `strings`). Pure."""

from __future__ import annotations

import ipaddress

from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.types import NUMERIC, Arg, ExpressionError, int_literal, literal


def num_kind(a: list[Arg]) -> str:
    return a[0].kind if a[0].kind in NUMERIC else "double"


def remainder(d: Dialect, a: list[str]) -> str:
    x, y = a
    return f"({x} - {y} * {d.sql('rint', f'{x} / {y}')})"


def pair_kind(a: list[Arg]) -> str:
    """max/min: longs stay longs, anything else compares as doubles."""
    return "long" if all(x.kind == "long" for x in a) else "double"


def minmax(sql: str):
    def emit(d: Dialect, a: list[Arg]) -> str:
        x, y = (d.cast_to(v, pair_kind(a)) for v in a)
        return f"(CASE WHEN {x} IS NULL OR {y} IS NULL THEN NULL ELSE {sql}({x}, {y}) END)"

    return emit


def round_kind(a: list[Arg]) -> str:
    return "long" if a[0].kind == "long" else "double"


def round_(d: Dialect, a: list[Arg]) -> str:
    places = d.sql("int_arg", d.long(a[1]) if len(a) == 2 else "0")
    if a[0].kind == "long":
        return f"round({a[0].sql}, {places})"
    # Druid: NaN rounds to 0, infinities to the nearest finite double
    return d.sql("round_double", d.num(a[0]), places)


def div(d: Dialect, a: list[str]) -> str:
    return d.long_divide(*a)


def both_long(a: list[Arg]) -> str:
    return "long" if a[0].kind == "long" and a[1].kind == "long" else "double"


def safe_divide(d: Dialect, a: list[Arg]) -> str:
    if both_long(a) == "long":
        return d.long_divide(a[0].sql, a[1].sql)
    return d.sql("safe_divide_double", d.double(a[0]), d.double(a[1]))


def reduce_kind(a: list[Arg]) -> str:
    """greatest/least: nulls ignored; all longs compare as longs, numbers as
    doubles, and a text literal makes them all compare as text."""
    if not a:
        return "string"
    kinds = {x.kind for x in a if x.sql != "NULL"}
    if kinds <= {"long"}:
        return "long"
    if kinds <= set(NUMERIC):
        return "double"
    if any(x.is_literal and x.kind == "string" for x in a):
        return "string"
    return "double"  # input columns are text here; Druid would read their numbers as numbers


def reduce(sql: str):
    def emit(d: Dialect, a: list[Arg]) -> str:
        if not a:
            return d.null("string")
        values = [d.cast_to(x, reduce_kind(a)) for x in a]
        return values[0] if len(values) == 1 else f"{sql}(" + ", ".join(values) + ")"

    return emit


# --- IPv4 (addresses as dotted text or as longs) ----------------------------------------

_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
DOTTED = rf"^{_OCTET}(\.{_OCTET}){{3}}$"


def ipv4_long(d: Dialect, arg: Arg) -> str:
    """The address as a long, or null when it is no IPv4 address. Digits-only
    text is a long (a JSON number arrives here as text)."""
    if arg.kind in NUMERIC:
        x = d.long(arg)
        return f"(CASE WHEN {x} BETWEEN 0 AND 4294967295 THEN {x} END)"
    return d.sql("ipv4_text", d.text(arg), d.sql_string(DOTTED))


def ipv4_parse(d: Dialect, a: list[Arg]) -> str:
    return ipv4_long(d, a[0])


def ipv4_stringify(d: Dialect, a: list[Arg]) -> str:
    def dotted(x: str) -> str:
        parts = [d.cast(d.sql("shift_right", x, b) + " & 255", "string") for b in (24, 16, 8, 0)]
        return f"(CASE WHEN {x} IS NOT NULL THEN concat_ws('.', {', '.join(parts)}) END)"

    return d.let(ipv4_long(d, a[0]), dotted)


def ipv4_match(d: Dialect, a: list[Arg]) -> str:
    subnet = literal(a[1], "the subnet", "ipv4_match")
    try:
        network = ipaddress.IPv4Network(str(subnet), strict=False)
    except ValueError:
        raise ExpressionError(f"ipv4_match(): {subnet!r} is not an IPv4 subnet") from None
    mask, base = (
        d.sql("bigint", int(network.netmask)),
        d.sql("bigint", int(network.network_address)),
    )
    return f"CAST(coalesce(({ipv4_long(d, a[0])} & {mask}) = {base}, false) AS BIGINT)"


# --- human-readable sizes -----------------------------------------------------------------


def human(base: int, units: tuple[str, ...], small: str):
    """`value` scaled to the largest unit it reaches, with `precision` (0-3, default
    2) decimals: human_readable_binary_byte_format(1048576) is '1.00 MiB'."""

    def emit(d: Dialect, a: list[Arg]) -> str:
        precision = 2
        if len(a) == 2:
            precision = int_literal(
                a[1], "the precision", "human_readable", 0, 3, "human_readable_*"
            )
        x, printf = d.long(a[0]), d.sql("printf")
        scale = " ".join(
            f"WHEN abs({x}) >= {d.sql('bigint', base**e)} THEN "
            f"{printf}('%.{precision}f {unit}', {x} / {d.sql('double_lit', base**e)})"
            for e, unit in reversed(list(enumerate(units, start=1)))
        )
        return f"(CASE WHEN {x} IS NULL THEN NULL {scale} ELSE {d.concat([x, repr(small)])} END)"

    return emit


BINARY_BYTES = human(1024, ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"), " B")
DECIMAL_BYTES = human(1000, ("KB", "MB", "GB", "TB", "PB", "EB"), " B")
DECIMAL = human(1000, ("K", "M", "G", "T", "P", "E"), "")
