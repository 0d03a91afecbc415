"""Druid expressions as Spark SQL: ingestion transforms (`translate`), transform
filters (`translate_predicate`) and native queries run on Spark.

The functions are those of Druid's "Expressions" reference
(docs/querying/math-expr.md), translated in `spark_functions` / `spark_time` and
the shared templates of `functions`; one Druid has but Strata does not translate
is refused by name (`ExpressionError`), so a spec never runs with a transform
silently changed. Identifiers are read as they come from the input (text from
JSON/CSV), so arithmetic parses its operands as numbers. Pure: no Spark or
Django import; the workers evaluate the result with `F.expr`.
"""

from __future__ import annotations

from metastore.druid.expressions import spark_types as t
from metastore.druid.expressions import tree
from metastore.druid.expressions.emit import Translated, emit
from metastore.druid.expressions.functions import not_in_reference
from metastore.druid.expressions.parse import parse
from metastore.druid.expressions.spark_functions import FUNCTIONS, REFUSED
from metastore.druid.expressions.types import Arg, ExpressionError

__all__ = ["SPARK", "ExpressionError", "Translated", "ident", "translate", "translate_predicate"]


def ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class SparkDialect:
    """Spark SQL (ANSI mode): what a value that does not convert becomes is null,
    never an error that would fail the task."""

    functions = FUNCTIONS
    text = staticmethod(t.text)
    num = staticmethod(t.num)
    truth = staticmethod(t.truth)
    as_long_bool = staticmethod(t.as_long_bool)
    cast_to = staticmethod(t.cast_to)
    array = staticmethod(t.array)

    @staticmethod
    def unknown(name: str) -> str:
        why = REFUSED.get(name) or not_in_reference(name)
        if why is None:
            why = (
                "it is not one of the functions of Druid's expression reference "
                "(docs/druid-expression-status.md lists them and their status here)"
            )
        return f"function {name}() is not supported: {why}"

    @staticmethod
    def literal(node: tree.Expr) -> Arg:
        if isinstance(node, tree.LongLiteral):
            return Arg(f"{node.value}L", "long", node.value, True)
        if isinstance(node, tree.DoubleLiteral):
            text = node.text.lstrip("-")
            sql = f"double('{text}')" if text in ("NaN", "Infinity") else f"{text}D"
            return Arg(
                f"(- {sql})" if node.text.startswith("-") else sql, "double", node.value, True
            )
        if isinstance(node, tree.StringLiteral):
            return Arg(t.sql_string(node.value), "string", node.value, True)
        return Arg("NULL", "string", None, True)

    @staticmethod
    def array_of(items: list[str], kind: str) -> str:
        return f"CAST(array({', '.join(items)}) AS {t.SPARK_TYPE[kind]})"

    @staticmethod
    def concat(left: str, right: str) -> str:
        return f"concat({left}, {right})"

    @staticmethod
    def long_divide(left: str, right: str) -> str:
        return f"(CASE WHEN {right} = 0 THEN NULL ELSE {left} DIV {right} END)"

    @staticmethod
    def double_divide(left: str, right: str) -> str:
        return f"try_divide({left}, {right})"

    @staticmethod
    def modulo(left: str, right: str) -> str:
        return f"try_mod({left}, {right})"

    @staticmethod
    def transform(arr: str, var: str, body: str) -> str:
        return f"transform({arr}, {var} -> {body})"

    @staticmethod
    def keep(arr: str, var: str, cond: str) -> str:
        kept = f"filter({arr}, {var} -> {cond})"
        return f"(CASE WHEN size({kept}) > 0 THEN {kept} END)"  # none kept: null, as Druid

    @staticmethod
    def exists(arr: str, var: str, cond: str, every: bool) -> str:
        return f"{'forall' if every else 'exists'}({arr}, {var} -> {cond})"

    @staticmethod
    def fold(arr: str, init: str, acc: str, var: str, step: str) -> str:
        return f"aggregate({arr}, {init}, ({acc}, {var}) -> {step})"

    @staticmethod
    def flatten(arr: str) -> str:
        return f"flatten({arr})"

    @staticmethod
    def row(names: list[str]) -> str:
        return "named_struct(" + ", ".join(f"'{n}', {n}" for n in names) + ")"


SPARK = SparkDialect()


def translate(
    source: str, types: dict[str, str] | None = None, *, time_column: str | None = None
) -> Translated:
    """A Druid expression as a Spark SQL expression; raises ExpressionError.

    `types` maps input columns to long/double/string where known (the worker
    passes the input's column types; validation passes none). `time_column`
    names the column holding the row's timestamp in epoch millis, which the
    expression reads as `__time` (as Druid's transforms do)."""
    types = types or {}

    def resolve(name: str) -> Arg:
        if name == "__time" and time_column:  # the row's timestamp, epoch millis
            return Arg(ident(time_column), "long")
        return Arg(ident(name), types.get(name, "string"))

    result = emit(SPARK, parse(source), resolve)
    if result.kind == "string" and result.sql == "NULL":
        return Translated("CAST(NULL AS STRING)", result.columns, result.kind)
    return result


def translate_predicate(
    source: str, types: dict[str, str] | None = None, *, time_column: str | None = None
) -> Translated:
    """A Druid expression used as a filter (Druid's `expression` filter): a Spark
    boolean, true where the value is true in Druid's sense (a positive number,
    the text 'true'), false where it is false or null."""
    result = translate(source, types, time_column=time_column)
    truthy = t.truth(Arg(result.sql, result.kind))
    return Translated(sql=f"coalesce({truthy}, false)", columns=result.columns, kind="boolean")
