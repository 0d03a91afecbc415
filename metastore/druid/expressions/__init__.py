"""Druid's expression language: one parse tree, an emitter per engine.

- `parse(text)`: the immutable tree (`tree`) of an expression, by Lark over a
  grammar translated from Druid's `Expr.g4` (`grammar`);
- `translate` / `translate_predicate`: Spark SQL, for ingestion transforms
  (`spark_sql`, functions in `spark_functions` / `spark_time`);
- `to_duckdb`: DuckDB SQL, for native queries (`duckdb_sql`);
- `functions`: what the engines share (template functions, the refusals of Druid
  SQL names). docs/druid-expression-status.md lists every function's status.

Pure: no Spark or Django import.
"""

from metastore.druid.expressions.emit import APPLY, Translated
from metastore.druid.expressions.parse import parse
from metastore.druid.expressions.spark_functions import FUNCTIONS, REFUSED
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
