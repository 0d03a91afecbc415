"""Druid expressions as DuckDB SQL, for native queries (expression virtual
columns, expression filters, aggregator and post-aggregator expressions) run on
DuckDB. The same tree and walk as the Spark emitter (`emit`), with DuckDB's SQL
(`duckdb_types`, `duckdb_functions`, `duckdb_time`). Pure: no Spark or Django import.
"""

from __future__ import annotations

from collections.abc import Callable

from metastore.druid.expressions import duckdb_types as t
from metastore.druid.expressions import tree
from metastore.druid.expressions.duckdb_functions import FUNCTIONS
from metastore.druid.expressions.emit import Translated, emit
from metastore.druid.expressions.functions import not_in_reference
from metastore.druid.expressions.parse import parse
from metastore.druid.expressions.types import Arg

__all__ = ["DUCKDB", "FUNCTIONS", "to_duckdb"]


class DuckDBDialect:
    functions = FUNCTIONS
    text = staticmethod(t.text)
    num = staticmethod(t.num)
    truth = staticmethod(t.truth)
    as_long_bool = staticmethod(t.as_long_bool)
    cast_to = staticmethod(t.cast_to)
    array = staticmethod(t.array)

    @staticmethod
    def unknown(name: str) -> str:
        why = not_in_reference(name)
        return (
            f"function {name}() is not supported in native queries here"
            + (f" ({why})" if why else "")
            + "; supported: "
            + ", ".join(sorted(FUNCTIONS))
        )

    @staticmethod
    def literal(node: tree.Expr) -> Arg:
        if isinstance(node, tree.LongLiteral):
            return Arg(f"CAST({node.value} AS BIGINT)", "long", node.value, True)
        if isinstance(node, tree.DoubleLiteral):
            return Arg(f"CAST('{node.text}' AS DOUBLE)", "double", node.value, True)
        if isinstance(node, tree.StringLiteral):
            return Arg(t.sql_string(node.value), "string", node.value, True)
        return Arg("NULL", "string", None, True)

    @staticmethod
    def array_of(items: list[str], kind: str) -> str:
        return f"CAST([{', '.join(items)}] AS {t.DUCK_TYPE[kind]})"

    @staticmethod
    def concat(left: str, right: str) -> str:
        return f"({left} || {right})"

    @staticmethod
    def long_divide(left: str, right: str) -> str:
        return f"({left} // NULLIF({right}, 0))"

    @staticmethod
    def double_divide(left: str, right: str) -> str:
        return f"(CAST({left} AS DOUBLE) / NULLIF({right}, 0))"

    @staticmethod
    def modulo(left: str, right: str) -> str:
        return f"({left} % NULLIF({right}, 0))"

    @staticmethod
    def transform(arr: str, var: str, body: str) -> str:
        return f"list_transform({arr}, lambda {var}: {body})"

    @staticmethod
    def keep(arr: str, var: str, cond: str) -> str:
        kept = f"list_filter({arr}, lambda {var}: {cond})"
        return f"(CASE WHEN len({kept}) > 0 THEN {kept} END)"  # none kept: null, as Druid

    @staticmethod
    def exists(arr: str, var: str, cond: str, every: bool) -> str:
        each = f"list_transform({arr}, lambda {var}: {cond})"
        if every:
            return f"(CASE WHEN {arr} IS NOT NULL THEN coalesce(list_bool_and({each}), true) END)"
        return f"(CASE WHEN {arr} IS NOT NULL THEN coalesce(list_bool_or({each}), false) END)"

    @staticmethod
    def fold(arr: str, init: str, acc: str, var: str, step: str) -> str:
        return f"list_reduce({arr}, lambda {acc}, {var}: {step}, {init})"

    @staticmethod
    def flatten(arr: str) -> str:
        return f"flatten({arr})"

    @staticmethod
    def row(names: list[str]) -> str:
        return "struct_pack(" + ", ".join(f"{n} := {n}" for n in names) + ")"


DUCKDB = DuckDBDialect()


def to_duckdb(source: str | tree.Expr, resolve: Callable[[str], Arg]) -> Translated:
    """A Druid expression (text or tree) as a DuckDB SQL expression over the
    columns `resolve` gives (name -> typed SQL); raises ExpressionError
    (UnsupportedFunction for a function not translated for DuckDB)."""
    root = parse(source) if isinstance(source, str) else source
    result = emit(DUCKDB, root, resolve)
    if result.kind == "string" and result.sql == "NULL":
        return Translated("CAST(NULL AS VARCHAR)", result.columns, result.kind)
    return result
