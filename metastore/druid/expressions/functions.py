"""What every engine shares about Druid's functions: which names are Druid SQL's
rather than the native expression language's, and simple functions whose
translation is one template over coerced arguments (the same SQL on Spark and
DuckDB, or a template per engine where their names differ).

docs/druid-expression-status.md lists every function of Druid's reference and
its status. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from metastore.druid.expressions.types import Arg, Function

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
