"""What every engine shares about Druid's functions: which names are Druid SQL's
rather than the native expression language's, simple functions whose
translation is one template over coerced arguments (the same SQL on Spark and
DuckDB, or a template per engine where their names differ), and the functions
written once over an engine's coercions (cast, the conditionals, like).

docs/druid-expression-status.md lists every function of Druid's reference and
its status. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from metastore.druid.expressions.types import (
    NUMERIC,
    Arg,
    ExpressionError,
    Function,
    common_kind,
    literal,
)

_SQL_NAMES = {
    "time_floor": "timestamp_floor",
    "time_ceil": "timestamp_ceil",
    "time_shift": "timestamp_shift",
    "time_extract": "timestamp_extract",
    "time_parse": "timestamp_parse",
    "time_format": "timestamp_format",
    "millis_to_timestamp": "a long of epoch millis as is",
    "timestamp_to_millis": "a long of epoch millis as is",
    "textcat": "concat",
    "char_length": "strlen",
    "length": "strlen",
    "position": "strpos",
    "nullif": "case_searched",
    "array_agg": "an aggregator",
}


def not_in_reference(name: str) -> str | None:
    """Why a name is no function of Druid's expression reference (a Druid SQL
    function, with what the native language uses instead), or None."""
    if name in _SQL_NAMES:
        return f"it is a Druid SQL function; the native expression uses {_SQL_NAMES[name]}"
    if name.startswith("mv_"):
        return "it is a Druid SQL function; native expressions use the array_* functions"
    return None


@dataclass(frozen=True)
class Template:
    """A function translated by one template: `{0}`, `{1}`... are the arguments,
    each coerced to `coerce` (text, num, long or double); `engines` overrides the
    template for an engine whose SQL differs."""

    arity: tuple[int, int | None]
    coerce: str
    template: str
    kind: str
    engines: tuple[tuple[str, str], ...] = ()

    def for_engine(self, engine: str) -> str:
        return dict(self.engines).get(engine, self.template)


def _math(name: str, arity: int = 1, **engines: str) -> Template:
    args = ", ".join(f"{{{i}}}" for i in range(arity))
    return Template((arity, arity), "double", f"{name}({args})", "double", tuple(engines.items()))


TEMPLATES: dict[str, Template] = {
    "upper": Template((1, 1), "text", "upper({0})", "string"),
    "lower": Template((1, 1), "text", "lower({0})", "string"),
    "reverse": Template((1, 1), "text", "reverse({0})", "string"),
    "replace": Template((3, 3), "text", "replace({0}, {1}, {2})", "string"),
    # Java's `$1` in the replacement is `\1` in DuckDB (RE2)
    "regexp_replace": Template(
        (3, 3),
        "text",
        "regexp_replace({0}, {1}, {2})",
        "string",
        (
            (
                "duckdb",
                "regexp_replace({0}, {1}, regexp_replace({2}, '[$]([0-9])', '\\\\\\1', 'g'), 'g')",
            ),
        ),
    ),
    **{
        name: _math(name)
        for name in (
            "acos",
            "asin",
            "atan",
            "cbrt",
            "cos",
            "cosh",
            "cot",
            "exp",
            "log10",
            "sin",
            "sinh",
            "sqrt",
            "tan",
            "tanh",
        )
    },
    "log": _math("ln"),
    "todegrees": _math("degrees"),
    "toradians": _math("radians"),
    "atan2": _math("atan2", 2),
    "pow": _math("power", 2),
    "expm1": _math("expm1", duckdb="(exp({0}) - 1)"),
    "log1p": _math("log1p", duckdb="ln(1 + {0})"),
    "rint": _math("rint", duckdb="round_even({0}, 0)"),
    "hypot": _math("hypot", 2, duckdb="sqrt({0} * {0} + {1} * {1})"),
    "signum": _math("signum", duckdb="CAST(sign({0}) AS DOUBLE)"),
    "pi": Template((0, 0), "double", "pi()", "double"),
    "bitwiseand": Template((2, 2), "long", "({0} & {1})", "long"),
    "bitwiseor": Template((2, 2), "long", "({0} | {1})", "long"),
    "bitwisexor": Template((2, 2), "long", "({0} ^ {1})", "long", (("duckdb", "xor({0}, {1})"),)),
    "bitwisecomplement": Template((1, 1), "long", "(~ {0})", "long"),
    "bitwiseshiftleft": Template(
        (2, 2), "long", "shiftleft({0}, CAST({1} AS INT))", "long", (("duckdb", "({0} << {1})"),)
    ),
    "bitwiseshiftright": Template(
        (2, 2), "long", "shiftright({0}, CAST({1} AS INT))", "long", (("duckdb", "({0} >> {1})"),)
    ),
}


def from_templates(engine: str, coercions: dict[str, Callable[[Arg], str]]) -> dict[str, Function]:
    """The template functions as an engine's `Function`s, with its coercions."""

    def function(t: Template) -> Function:
        template, coerce = t.for_engine(engine), coercions[t.coerce]
        return Function(t.arity, lambda a: (template.format(*[coerce(x) for x in a]), t.kind))

    return {name: function(t) for name, t in TEMPLATES.items()}


# --- functions written once over an engine's coercions ----------------------------------
# `c` is an engine's coercion module (spark_types, duckdb_types): text, num, truth,
# as_long_bool, cast_to, sql_string, each giving that engine's SQL.

_CASTS = {
    "LONG": "long",
    "DOUBLE": "double",
    "FLOAT": "double",
    "STRING": "string",
    "ARRAY<LONG>": "array<long>",
    "ARRAY<DOUBLE>": "array<double>",
    "ARRAY<STRING>": "array<string>",
}


def general(c) -> dict[str, Function]:
    """cast, the conditionals, the null tests and like, for the engine of `c`."""

    def branches(args: list[Arg]) -> tuple[list[str], str]:
        kind = common_kind(args)
        return [c.cast_to(x, kind) for x in args], kind

    def coalesce(a):
        values, kind = branches(a)
        return "coalesce(" + ", ".join(values) + ")", kind

    def if_(a):
        (then, other), kind = branches(a[1:])
        return f"(CASE WHEN {c.truth(a[0])} THEN {then} ELSE {other} END)", kind

    def cases(conditions: list[str], results: list[Arg], default: Arg | None):
        values, kind = branches(results + ([default] if default is not None else []))
        whens = " ".join(f"WHEN {w} THEN {v}" for w, v in zip(conditions, values, strict=False))
        other = f" ELSE {values[-1]}" if default is not None else ""
        return f"(CASE {whens}{other} END)", kind

    def case_searched(a):
        pairs, rest = a[: len(a) // 2 * 2], a[len(a) // 2 * 2 :]
        return cases([c.truth(x) for x in pairs[0::2]], pairs[1::2], rest[0] if rest else None)

    def case_simple(a):
        subject, rest = a[0], a[1:]
        pairs, tail = rest[: len(rest) // 2 * 2], rest[len(rest) // 2 * 2 :]
        tests = [_equals(c, subject, v) for v in pairs[0::2]]
        return cases(tests, pairs[1::2], tail[0] if tail else None)

    def test(template: str):
        return lambda a: (c.as_long_bool(template.format(a[0].sql)), "long")

    return {
        "cast": Function((2, 2), lambda a: _cast(c, a)),
        "coalesce": Function((1, None), coalesce),
        "nvl": Function((2, 2), coalesce),
        "if": Function((3, 3), if_),
        "case_searched": Function((2, None), case_searched),
        "case_simple": Function((3, None), case_simple),
        "isnull": Function((1, 1), test("({} IS NULL)")),
        "notnull": Function((1, 1), test("({} IS NOT NULL)")),
        "like": Function((2, 3), lambda a: _like(c, a)),
    }


def _cast(c, a: list[Arg]) -> tuple[str, str]:
    target = str(literal(a[1], "the type", "cast")).upper().replace(" ", "")
    if target not in _CASTS:
        raise ExpressionError(f"cast to {target!r} is not supported; accepted: {', '.join(_CASTS)}")
    return c.cast_to(a[0], _CASTS[target]), _CASTS[target]


def _like(c, a: list[Arg]) -> tuple[str, str]:
    escape = ""
    if len(a) == 3:
        escape = f" ESCAPE {c.sql_string(str(literal(a[2], 'the escape', 'like')))}"
    return c.as_long_bool(f"({c.text(a[0])} LIKE {c.text(a[1])}{escape})"), "long"


def _equals(c, x: Arg, y: Arg) -> str:
    """case_simple's test: numbers compare as numbers, anything else as text."""
    if x.kind in NUMERIC or y.kind in NUMERIC:
        return f"({c.num(x)} = {c.num(y)})"
    return f"({c.text(x)} = {c.text(y)})"
