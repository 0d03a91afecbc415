"""Druid's expression language: one parse tree, an emitter per engine.

- `parse(text)`: the immutable tree (`tree`) of an expression, by Lark over a
  grammar translated from Druid's `Expr.g4` (`grammar`);
- `emit`: one walk of the tree for every engine, over a `dialect.Dialect`;
- `functions`: one table of Druid's functions for every engine (name, arity,
  argument and result types, null semantics, SQL written once over a dialect),
  with the refusals; docs/druid-expression-status.md lists every function's status;
- `translate` / `translate_predicate`: Spark SQL, for ingestion transforms and
  native queries on Spark (`spark_sql`, the Spark dialect);
- `to_duckdb`: DuckDB SQL, for native queries (`duckdb_sql`, the DuckDB dialect).

Pure: no Spark or Django import.
"""

from metastore.druid.expressions.emit import APPLY, Translated
from metastore.druid.expressions.functions import FUNCTIONS, REFUSED
from metastore.druid.expressions.parse import parse
from metastore.druid.expressions.spark_sql import translate, translate_predicate
from metastore.druid.expressions.types import Arg, ExpressionError, UnsupportedFunction

__all__ = [
    "APPLY",
    "FUNCTIONS",
    "REFUSED",
    "Arg",
    "ExpressionError",
    "Translated",
    "UnsupportedFunction",
    "parse",
    "translate",
    "translate_predicate",
]
