"""One walk of the expression tree for every engine: Druid's operator, literal and
lambda semantics written once, over a `Dialect` that knows the engine's SQL, and
the function table of `functions`.

The dialects are `spark_sql.SPARK` (ingestion transforms, native queries run on
Spark) and `duckdb_sql.DUCKDB` (native queries on DuckDB). Typing follows Druid:
long literals are longs, literals with a dot doubles; long / long divides as
integers; text meets a number as a number (`number * 3` on "100" gives 300).
Null semantics are Druid's SQL-compatible ones: an operator with a null operand
is null; `&&`/`||` are three-valued; booleans are longs 1/0. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from metastore.druid.expressions import tree
from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.functions import FUNCTIONS
from metastore.druid.expressions.types import (
    NUMERIC,
    Arg,
    ExpressionError,
    UnsupportedFunction,
    element_kind,
    scalar_kind,
)

_COMPARE = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "=", "!=": "<>"}
APPLY = ("map", "filter", "fold", "any", "all", "cartesian_map", "cartesian_fold")

# Functions whose text result may be a number read as text (an input field, a JSON
# literal): like an input column, it adds and compares as a number against a number.
_MAYBE_NUMBER = {
    "json_value",
    "array_offset",
    "array_ordinal",
    "coalesce",
    "nvl",
    "if",
    "case_searched",
    "case_simple",
    "greatest",
    "least",
}


@dataclass(frozen=True)
class Translated:
    sql: str  # an SQL expression of the engine
    columns: tuple[str, ...]  # input columns read, in order of first use
    kind: str = "any"  # the Druid type of the result


class Emitter:
    """Emits one tree as typed `Arg`s. `resolve` gives a column's SQL and Druid
    type; the names it was asked for are collected in `columns`."""

    def __init__(self, dialect: Dialect, resolve: Callable[[str], Arg]) -> None:
        self.d = dialect
        self.resolve = resolve
        self.columns: list[str] = []
        self.scope: dict[str, Arg] = {}  # lambda parameters in scope
        self.lambdas = 0

    def emit(self, node: tree.Expr) -> Arg:
        if isinstance(node, tree.LITERALS):
            return self.d.literal(node)
        if isinstance(node, tree.Identifier):
            return self.column(node.name)
        if isinstance(node, tree.ArrayLiteral):
            return self.array_literal(node)
        if isinstance(node, tree.Unary):
            operand = self.emit(node.operand)
            if node.op == "-":
                kind = operand.kind if operand.kind in NUMERIC else "double"
                return Arg(f"(- {self.d.num(operand)})", kind)
            return Arg(self.d.as_long_bool(f"NOT {self.d.truth(operand)}"), "long")
        if isinstance(node, tree.Binary):
            return self.binary(node)
        if isinstance(node, tree.Lambda):
            raise ExpressionError("a lambda is only an argument of map, filter, fold, any, all")
        return self.call(node)

    def column(self, name: str) -> Arg:
        if name in self.scope:
            return self.scope[name]
        if name not in self.columns:
            self.columns.append(name)
        return self.resolve(name)

    def array_literal(self, node: tree.ArrayLiteral) -> Arg:
        values = [self.emit(e) for e in node.elements]
        kind = _array_kind(node.element_type, values)
        elem = element_kind(kind)
        return Arg(self.d.array_of([self.d.cast_to(v, elem) for v in values], kind), kind)

    def binary(self, node: tree.Binary) -> Arg:
        op, d = node.op, self.d
        a, b = self.emit(node.left), self.emit(node.right)
        if op in ("&&", "||"):
            word = "AND" if op == "&&" else "OR"  # SQL's AND/OR are three-valued, as Druid's
            return Arg(d.as_long_bool(f"({d.truth(a)} {word} {d.truth(b)})"), "long")
        stringy = _is_text(node.left, a) or _is_text(node.right, b)
        if op in _COMPARE:
            return Arg(d.as_long_bool(self.compare(op, a, b, stringy)), "long")
        if op == "+" and stringy:
            return Arg(d.concat([d.text(a), d.text(b)]), "string")
        left, right = d.num(a), d.num(b)
        both_long = a.kind == "long" and b.kind == "long"
        if op == "^":
            return Arg(f"power({left}, {right})", "double")
        if op == "/":
            if both_long:  # Druid: long / long is integer division
                return Arg(d.long_divide(left, right), "long")
            return Arg(d.double_divide(left, right), "double")
        if op == "%":
            return Arg(d.modulo(left, right), "long" if both_long else "double")
        return Arg(f"({left} {op} {right})", "long" if both_long else "double")

    def compare(self, op: str, a: Arg, b: Arg, stringy: bool) -> str:
        """Text compares as text, numbers as numbers; two input columns (text at
        ingestion, even when JSON held numbers) compare as numbers when both read as
        numbers."""
        sign, d = _COMPARE[op], self.d
        if stringy:
            return f"({d.text(a)} {sign} {d.text(b)})"
        if a.kind in NUMERIC or b.kind in NUMERIC:
            return f"({d.num(a)} {sign} {d.num(b)})"
        numbers = f"{d.num(a)} IS NOT NULL AND {d.num(b)} IS NOT NULL"
        return (
            f"(CASE WHEN {numbers} THEN {d.num(a)} {sign} {d.num(b)} "
            f"ELSE {d.text(a)} {sign} {d.text(b)} END)"
        )

    def call(self, node: tree.Call) -> Arg:
        name = node.name
        if name in APPLY:
            return self.apply(node)
        function = FUNCTIONS.get(name)
        if function is None:
            raise UnsupportedFunction(name, self.d.unknown(name))
        lo, hi = function.arity
        if len(node.args) < lo or (hi is not None and len(node.args) > hi):
            want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi else f"at least {lo}"
            raise ExpressionError(f"{name}() takes {want} arguments, not {len(node.args)}")
        sql, kind = function.emit(self.d, [self.emit(arg) for arg in node.args])
        return Arg(sql, kind)

    def apply(self, node: tree.Call) -> Arg:
        """map/filter/fold/any/all with a lambda, as the engine's higher-order functions."""
        name, args, d = node.name, node.args, self.d
        if name.startswith("cartesian_"):
            return self.cartesian(node)
        want = 3 if name == "fold" else 2
        if len(args) != want or not isinstance(args[0], tree.Lambda):
            raise ExpressionError(f"{name}() takes a lambda and {want - 1} more arguments")
        params, body = args[0].params, args[0].body
        if len(params) != (2 if name == "fold" else 1):
            raise ExpressionError(
                f"{name}(): the lambda takes {2 if name == 'fold' else 1} arguments"
            )
        arr, kind = d.array(self.emit(args[1]))
        init = self.emit(args[2]) if name == "fold" else None
        names = self.fresh(len(params))
        bound = [Arg(names[0], element_kind(kind))] + ([Arg(names[1], init.kind)] if init else [])
        result = self.body(params, bound, body)
        x = names[0]
        if name == "map":
            return Arg(d.transform(arr, x, result.sql), f"array<{scalar_kind(result.kind)}>")
        if name == "filter":
            return Arg(d.keep(arr, x, d.truth(result)), kind)
        if name in ("any", "all"):
            return Arg(d.as_long_bool(d.exists(arr, x, d.truth(result), name == "all")), "long")
        step = d.cast_to(result, init.kind)
        return Arg(d.fold(arr, d.cast_to(init, init.kind), names[1], x, step), init.kind)

    def cartesian(self, node: tree.Call) -> Arg:
        """cartesian_map / cartesian_fold: the lambda over every combination of
        the arrays' elements (nested transforms, flattened)."""
        name, args, d = node.name, node.args, self.d
        folding = name == "cartesian_fold"
        inputs = args[1:-1] if folding else args[1:]
        if not args or not isinstance(args[0], tree.Lambda) or not inputs:
            raise ExpressionError(f"{name}() takes a lambda and its arrays")
        params, body = args[0].params, args[0].body
        if len(params) != len(inputs) + folding:
            raise ExpressionError(f"{name}(): the lambda takes one argument per array")
        arrays = [d.array(self.emit(a)) for a in inputs]
        names = self.fresh(len(inputs))
        if not folding:
            bound = [Arg(n, element_kind(k)) for n, (_, k) in zip(names, arrays, strict=True)]
            result = self.body(params, bound, body)
            return Arg(
                self.product(arrays, names, result.sql), f"array<{scalar_kind(result.kind)}>"
            )
        init = self.emit(args[-1])
        row, acc = self.fresh(2)
        bound = [
            Arg(f"{row}.{n}", element_kind(k)) for n, (_, k) in zip(names, arrays, strict=True)
        ]
        result = self.body(params, [*bound, Arg(acc, init.kind)], body)
        rows = self.product(arrays, names, d.row(names))
        step = d.cast_to(result, init.kind)
        return Arg(d.fold(rows, d.cast_to(init, init.kind), acc, row, step), init.kind)

    def product(self, arrays: list[tuple[str, str]], names: list[str], inner: str) -> str:
        for (arr, _), n in reversed(list(zip(arrays, names, strict=True))):
            inner = self.d.transform(arr, n, inner)
        for _ in arrays[1:]:
            inner = self.d.flatten(inner)
        return inner

    def fresh(self, count: int) -> list[str]:
        """New lambda variable names (never an input column's)."""
        self.lambdas += count
        return [f"_l{i}" for i in range(self.lambdas - count + 1, self.lambdas + 1)]

    def body(self, params: tuple[str, ...], bound: list[Arg], body: tree.Expr) -> Arg:
        """A lambda's body, its parameters shadowing input columns of their names."""
        saved = dict(self.scope)
        self.scope.update(zip(params, bound, strict=True))
        try:
            return self.emit(body)
        finally:
            self.scope = saved


_ARRAY_TYPES = {"STRING": "array<string>", "LONG": "array<long>", "DOUBLE": "array<double>"}


def _array_kind(element_type: str | None, values: list[Arg]) -> str:
    if element_type is not None:
        if element_type not in _ARRAY_TYPES:
            raise ExpressionError(f"unknown array type <{element_type}>; use STRING, LONG, DOUBLE")
        return _ARRAY_TYPES[element_type]
    kinds = {v.kind for v in values if v.sql != "NULL"}
    if kinds and kinds <= set(NUMERIC):
        return "array<double>" if "double" in kinds else "array<long>"
    return "array<string>"


def _is_text(node: tree.Expr, arg: Arg) -> bool:
    """Whether `+` concatenates and comparisons compare as text: a string literal or
    a function returning text. Input columns may be text holding numbers (JSON/CSV
    numbers arrive as text), so they compare as numbers against numbers."""
    if isinstance(node, tree.Identifier) or (
        isinstance(node, tree.Call) and node.name in _MAYBE_NUMBER
    ):
        return False
    return arg.kind in ("string", "json")


def emit(dialect: Dialect, root: tree.Expr, resolve: Callable[[str], Arg]) -> Translated:
    """The tree as one SQL expression of the dialect; raises ExpressionError."""
    emitter = Emitter(dialect, resolve)
    try:
        result = emitter.emit(root)
    except RecursionError:
        raise ExpressionError("is nested too deeply") from None
    return Translated(sql=result.sql, columns=tuple(emitter.columns), kind=result.kind)
