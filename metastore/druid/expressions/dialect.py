"""What an engine's SQL looks like: the one thing the two emitters of Druid's
expressions do not share.

`Dialect` writes Druid's coercions once (text, number, long, truth, array,
conversion to a Druid type), with Druid's null semantics: a value that does not
convert is null, never an error. What differs between Spark SQL and DuckDB SQL
is a subclass's: its type names, its `SPELLING` table of SQL templates (`{0}`,
`{1}`... are the arguments; the keys are the same for every engine) and a few
methods where the SQL differs in shape (JSON access, time parsing, number
parsing). The subclasses are `spark_sql.SparkDialect` and
`duckdb_sql.DuckDBDialect`. Pure: no Spark or Django import.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from metastore.druid.expressions import tree
from metastore.druid.expressions.types import ARRAYS, NUMERIC, Arg, ExpressionError, element_kind


class Dialect(ABC):
    """An engine's SQL. The coercions turn an `Arg` into the form a function needs."""

    name: str
    TYPES: dict[str, str]  # Druid type -> the engine's SQL type
    TRY: str  # the engine's cast that gives null instead of failing
    NESTED: tuple[str, ...]  # Druid types whose text is their JSON
    SPELLING: dict[str, str]  # the same keys in every engine (a test checks it)
    PRINTF_SHOWS_NULL = False  # whether `printf` prints "null" for a null value, as Java
    EXTRACT: dict[str, str]  # timestamp_extract's units, over `{t}`

    def sql(self, key: str, *args: object) -> str:
        """The engine's SQL for `key`, its arguments in the template."""
        return self.SPELLING[key].format(*args)

    @abstractmethod
    def unknown(self, name: str) -> str:
        """The refusal of a function the engine does not translate, naming it."""

    # --- values -----------------------------------------------------------------------

    @abstractmethod
    def sql_string(self, value: str) -> str:
        """A string literal."""

    @abstractmethod
    def long_literal(self, value: int) -> str:
        """A long literal (BIGINT)."""

    @abstractmethod
    def double_literal(self, text: str) -> str:
        """A double literal as written (`1.5`, `-1e3`, `NaN`, `-Infinity`)."""

    def literal(self, node: tree.Expr) -> Arg:
        if isinstance(node, tree.LongLiteral):
            return Arg(self.long_literal(node.value), "long", node.value, True)
        if isinstance(node, tree.DoubleLiteral):
            return Arg(self.double_literal(node.text), "double", node.value, True)
        if isinstance(node, tree.StringLiteral):
            return Arg(self.sql_string(node.value), "string", node.value, True)
        return Arg("NULL", "string", None, True)

    def cast(self, sql: str, kind: str) -> str:
        return f"CAST({sql} AS {self.TYPES[kind]})"

    def null(self, kind: str) -> str:
        return f"CAST(NULL AS {self.TYPES.get(kind, self.TYPES['string'])})"

    def try_cast(self, sql: str, sql_type: str) -> str:
        return f"{self.TRY}({sql} AS {sql_type})"

    def let(self, value: str, body: Callable[[str], str]) -> str:
        """`body` over `value`; an engine that would copy a large tree binds it once."""
        return body(value)

    # --- coercions --------------------------------------------------------------------

    def text(self, arg: Arg) -> str:
        """The value as Druid shows it as a string (JSON text for arrays and nested values)."""
        if arg.kind in ("string", "json"):
            return arg.sql
        if arg.kind in self.NESTED:
            return self.sql("json_text_of", arg.sql)
        return self.cast(arg.sql, "string")

    def num(self, arg: Arg) -> str:
        """A number (long or double as they are; text parsed as a double, else null)."""
        if arg.kind in NUMERIC:
            return arg.sql
        return self.try_cast(f"trim({self.text(arg)})", "DOUBLE")

    def long(self, arg: Arg) -> str:
        """A long: doubles truncate (Java's cast); text as a long, else as a double truncated."""
        if arg.kind == "long":
            return arg.sql
        if arg.kind == "double":
            return self.sql("double_to_long", arg.sql)
        return self.sql("text_to_long", f"trim({self.text(arg)})")

    def double(self, arg: Arg) -> str:
        if arg.kind in NUMERIC:
            return f"CAST({arg.sql} AS DOUBLE)"
        return self.num(arg)

    def coerce(self, how: str, arg: Arg) -> str | Arg:
        """The argument as a function's row asks for it (`any`: the typed `Arg` itself)."""
        if how == "any":
            return arg
        return getattr(self, how)(arg)

    def truth(self, arg: Arg) -> str:
        """Druid truthiness as a boolean, null when the value is null: a number is true
        when positive, text when it is 'true' (any case) — or, since JSON and CSV
        numbers arrive as text, when it reads as a positive number."""
        if arg.kind in NUMERIC:
            return f"({arg.sql} > 0)"
        t = self.text(arg)
        positive = self.try_cast(f"trim({t})", "DOUBLE")
        return (
            f"(CASE WHEN {t} IS NULL THEN NULL ELSE "
            f"(lower(trim({t})) = 'true' OR coalesce({positive} > 0, false)) END)"
        )

    def as_long_bool(self, cond: str) -> str:
        """A boolean as Druid's 1/0 long (null stays null)."""
        return f"CAST({cond} AS BIGINT)"

    def array(self, arg: Arg) -> tuple[str, str]:
        """(array, Druid array type). Text holding a JSON array (how a JSON input's
        array field is read) is parsed; any other scalar is a one-element array, as
        Druid treats a scalar where it wants an array."""
        if arg.kind in ARRAYS:
            return arg.sql, arg.kind
        if arg.kind in NUMERIC:
            one = self.sql("array", arg.sql)
            return f"(CASE WHEN {arg.sql} IS NULL THEN NULL ELSE {one} END)", f"array<{arg.kind}>"
        if arg.kind in self.NESTED:
            return self.sql("string_array", self.text(arg)), "array<string>"
        t = self.text(arg)
        is_array = self.sql("starts_with", f"ltrim({t})", "'['")
        return (
            f"(CASE WHEN {t} IS NULL THEN NULL WHEN {is_array} "
            f"THEN {self.sql('string_array', t)} ELSE {self.sql('array', t)} END)",
            "array<string>",
        )

    def cast_to(self, arg: Arg, kind: str) -> str:
        """The argument converted to a Druid type (null when it does not convert)."""
        if arg.sql == "NULL":
            return self.null(kind)
        if kind == "long":
            return self.long(arg)
        if kind == "double":
            return self.double(arg)
        if kind in ("string", "json"):
            return self.text(arg)
        if kind in ARRAYS:
            sql, have = self.array(arg)
            if have == kind:
                return sql
            inner = self.cast_to(Arg("_e", element_kind(have)), element_kind(kind))
            return self.transform(sql, "_e", inner)
        raise ExpressionError(f"cannot convert to {kind}")

    # --- operators and arrays, for the tree walk (`emit`) -----------------------------

    def array_of(self, items: list[str], kind: str) -> str:
        return self.cast(self.sql("array", ", ".join(items)), kind)

    @abstractmethod
    def concat(self, items: list[str]) -> str:
        """Text joined, null if any part is null."""

    def long_divide(self, left: str, right: str) -> str:
        return self.sql("long_divide", left, right)

    def double_divide(self, left: str, right: str) -> str:
        return self.sql("double_divide", left, right)

    def modulo(self, left: str, right: str) -> str:
        return self.sql("modulo", left, right)

    def transform(self, arr: str, var: str, body: str) -> str:
        return self.sql("transform", arr, var, body)

    def keep(self, arr: str, var: str, cond: str) -> str:
        kept = self.sql("filter", arr, var, cond)
        size = self.sql("size", kept)
        return f"(CASE WHEN {size} > 0 THEN {kept} END)"  # none kept: null, as Druid

    @abstractmethod
    def exists(self, arr: str, var: str, cond: str, every: bool) -> str:
        """any/all: whether `cond` holds for some (every) element."""

    def fold(self, arr: str, init: str, acc: str, var: str, step: str) -> str:
        return self.sql("fold", arr, init, acc, var, step)

    def flatten(self, arr: str) -> str:
        return f"flatten({arr})"

    @abstractmethod
    def row(self, names: list[str]) -> str:
        """A struct of lambda variables, each a field of its name (cartesian_fold)."""

    # --- what differs in shape, not only in spelling ----------------------------------

    @abstractmethod
    def join_array(self, arr: str, kind: str, sep: str, *, constant: bool = True) -> str:
        """array_to_string: the elements as text joined by `sep` (null as 'null');
        `constant`: whether `sep` is a literal."""

    @abstractmethod
    def split(self, t: str, pattern: str) -> str:
        """string_to_array: Java's String.split (a regex; trailing empty strings dropped)."""

    @abstractmethod
    def json_typed(self, arg: Arg, path: str, kind: str) -> str:
        """json_value with a type: the value at the JSONPath as that Druid type."""

    @abstractmethod
    def json_scalar(self, arg: Arg, path: str) -> str:
        """json_value: a scalar at the path as text (booleans 1/0, arrays as JSON)."""

    @abstractmethod
    def json_extract(self, arg: Arg, path: str) -> str:
        """The JSON text at the path."""

    @abstractmethod
    def json_array(self, arg: Arg, path: str) -> str:
        """json_query_array: the array at the path as JSON texts."""

    @abstractmethod
    def json_keys(self, arg: Arg, path: str) -> str:
        """The keys of the object at the path, sorted."""

    @abstractmethod
    def json_object(self, keys: list[str], values: list[Arg]) -> str:
        """A JSON object of SQL string keys and typed values."""

    @abstractmethod
    def json_text(self, arg: Arg) -> str:
        """to_json_string: the value as JSON text."""

    @abstractmethod
    def add_period(self, local: str, unit: str, count: str) -> str:
        """A timestamp moved by `count` of a period's unit."""

    @abstractmethod
    def date_pattern(self, arg: Arg, name: str) -> str:
        """A Java date pattern argument as the engine's format."""

    @abstractmethod
    def parse_iso(self, t: str, zone: str | None) -> str:
        """ISO 8601 or SQL text as epoch millis; a zone applies to text without an offset."""
