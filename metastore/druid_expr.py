"""Druid's native expression language (transformSpec.transforms) translated to Spark SQL.

`translate(text)` parses a Druid expression (literals, array literals, identifiers
bare or in double quotes, unary `-` / `!`, `^ * / % + - < <= > >= == != && ||`,
function calls, lambdas for the apply functions) and returns an equivalent Spark
SQL expression string plus the input columns it reads. The functions are those
of Druid's "Expressions" reference (docs/querying/math-expr.md), translated in
`druid_expr_functions` / `druid_expr_time`; one Druid has but Strata does not
translate is refused by name (`ExpressionError`), so a spec never runs with a
transform silently changed. docs/druid-expression-status.md lists every function
and its status. Pure: no Spark or Django import; the workers evaluate the
result with `F.expr`.

Typing follows Druid: long literals are longs, literals with a dot doubles.
Identifiers are read as they come from the input (text from JSON/CSV), so
arithmetic parses its operands as numbers: `number * 3` on "100" gives 300.
Null semantics are Druid's SQL-compatible ones: a binary operator or comparison
with a null operand is null; `&&`/`||` are three-valued; booleans are longs 1/0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from metastore.druid_expr_functions import FUNCTIONS, REFUSED
from metastore.druid_expr_types import (
    NUMERIC,
    SPARK_TYPE,
    Arg,
    ExpressionError,
    array,
    as_long_bool,
    cast_to,
    element_kind,
    num,
    sql_string,
    text,
    truth,
)

__all__ = [
    "ExpressionError",
    "FUNCTIONS",
    "REFUSED",
    "Translated",
    "translate",
    "translate_predicate",
]


@dataclass(frozen=True)
class Translated:
    sql: str  # a Spark SQL expression
    columns: tuple[str, ...]  # input columns read, in order of first use
    kind: str = "any"  # the Druid type of the result


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?)
      | (?P<str>'(?:[^'\\]|\\.)*')
      | (?P<qid>"(?:[^"\\]|\\.)*")
      | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
      | (?P<op>->|&&|\|\||<=|>=|==|!=|[-+*/%^<>!(),\[\]])
    )""",
    re.VERBOSE,
)

# Binary operators by precedence, lowest first (Druid's ExprParser grammar).
_LEVELS = [
    ("||",),
    ("&&",),
    ("<", "<=", ">", ">=", "==", "!="),
    ("+", "-"),
    ("*", "/", "%"),
    ("^",),
]
_ARRAY_TYPES = {"STRING": "array<string>", "LONG": "array<long>", "DOUBLE": "array<double>"}


def _unquote(raw: str) -> str:
    body = raw[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class Node:
    # "num", "str", "null", "col", "call", "op", "neg", "not", "array", "lambda"
    def __init__(self, kind: str, value=None, args=()):
        self.kind = kind
        self.value = value
        self.args = list(args)


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        source = source.rstrip()
        while pos < len(source):
            m = _TOKEN.match(source, pos)
            if not m or m.end() == pos:
                raise ExpressionError(
                    f"cannot parse {source!r} at position {pos}: {source[pos : pos + 10]!r}"
                )
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.text = source

    def peek(self, ahead: int = 0) -> tuple[str, str] | None:
        i = self.i + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            want = f"{value!r}" if value else "more input"
            raise ExpressionError(f"cannot parse {self.text!r}: expected {want}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.binary(0)
        if self.peek() is not None:
            raise ExpressionError(f"cannot parse {self.text!r}: unexpected {self.peek()[1]!r}")
        return node

    def binary(self, level: int) -> Node:
        if level == len(_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while (tok := self.peek()) is not None and tok[0] == "op" and tok[1] in _LEVELS[level]:
            self.take()
            # ^ is right-associative in Druid
            right = self.binary(level if tok[1] == "^" else level + 1)
            left = Node("op", tok[1], [left, right])
        return left

    def unary(self) -> Node:
        tok = self.peek()
        if tok and tok[0] == "op" and tok[1] in ("-", "!"):
            self.take()
            operand = self.unary()
            if tok[1] == "-" and operand.kind == "num":
                return Node("num", "-" + operand.value)
            return Node("neg" if tok[1] == "-" else "not", None, [operand])
        return self.primary()

    def primary(self) -> Node:
        if self._lambda_ahead():
            return self.lambda_()
        kind, value = self.take()
        if kind == "num":
            return Node("num", value)
        if kind == "str":
            return Node("str", _unquote(value))
        if kind == "qid":
            return Node("col", _unquote(value))
        if kind == "id":
            nxt = self.peek()
            if nxt is not None and nxt[1] == "(":
                return Node("call", value.lower(), self.arguments())
            if value == "null":
                return Node("null")
            return Node("col", value)
        if value == "(":
            node = self.binary(0)
            self.take(")")
            return node
        if value == "[":
            return self.array_literal(None)
        if value == "<":  # a typed array literal: <LONG>[1, 2]
            type_name = self.take()[1].upper()
            self.take(">")
            self.take("[")
            if type_name not in _ARRAY_TYPES:
                raise ExpressionError(f"unknown array type <{type_name}>; use STRING, LONG, DOUBLE")
            return self.array_literal(_ARRAY_TYPES[type_name])
        raise ExpressionError(f"cannot parse {self.text!r}: unexpected {value!r}")

    def arguments(self) -> list[Node]:
        self.take("(")
        args = []
        if self.peek() is not None and self.peek()[1] != ")":
            args.append(self.binary(0))
            while self.peek() is not None and self.peek()[1] == ",":
                self.take(",")
                args.append(self.binary(0))
        self.take(")")
        return args

    def array_literal(self, kind: str | None) -> Node:
        """Elements separated by commas or spaces, up to `]` (already past `[`)."""
        elements = []
        while self.peek() is not None and self.peek()[1] != "]":
            if self.peek()[1] == ",":
                self.take(",")
                continue
            elements.append(self.unary())
        self.take("]")
        for e in elements:
            if e.kind not in ("num", "str", "null"):
                raise ExpressionError("array literals hold only literal values; use array(...)")
        return Node("array", kind, elements)

    def _lambda_ahead(self) -> bool:
        """`(x, y) -> ...` starts here."""
        if self.peek() is None or self.peek()[1] != "(":
            return False
        i = 1
        while (tok := self.peek(i)) is not None and (tok[0] == "id" or tok[1] == ","):
            i += 1
        closing, arrow = self.peek(i), self.peek(i + 1)
        return bool(closing and closing[1] == ")" and arrow and arrow[1] == "->")

    def lambda_(self) -> Node:
        self.take("(")
        names = []
        while self.peek()[1] != ")":
            tok = self.take()
            if tok[0] == "id":
                names.append(tok[1])
        self.take(")")
        self.take("->")
        return Node("lambda", names, [self.binary(0)])


# --- emitting ---------------------------------------------------------------------------


_COMPARE = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "=", "!=": "<>"}
_APPLY = ("map", "filter", "fold", "any", "all", "cartesian_map", "cartesian_fold")


class _Emitter:
    """Emits Spark SQL as typed `Arg`s; `types` gives the input columns' types
    (long, double, string) when known: long stays long (so long / long divides as
    integers, as in Druid); text read from JSON or CSV is a number in numeric
    context."""

    def __init__(self, types: dict[str, str] | None, time_column: str | None = None) -> None:
        self.types = types or {}
        self.time_column = time_column
        self.columns: list[str] = []
        self.scope: dict[str, Arg] = {}  # lambda parameters in scope
        self.lambdas = 0

    def emit(self, node: Node) -> Arg:
        kind = node.kind
        if kind == "num":
            is_double = "." in node.value or "e" in node.value.lower()
            if is_double:
                return Arg(f"{node.value}D", "double", float(node.value), True)
            return Arg(f"{node.value}L", "long", int(node.value), True)
        if kind == "str":
            return Arg(sql_string(node.value), "string", node.value, True)
        if kind == "null":
            return Arg("NULL", "string", None, True)
        if kind == "col":
            return self.column(node.value)
        if kind == "array":
            return self.array_literal(node)
        if kind == "neg":
            operand = self.emit(node.args[0])
            return Arg(f"(- {num(operand)})", operand.kind if operand.kind in NUMERIC else "double")
        if kind == "not":
            return Arg(as_long_bool(f"NOT {truth(self.emit(node.args[0]))}"), "long")
        if kind == "op":
            return self.op(node)
        if kind == "lambda":
            raise ExpressionError("a lambda is only an argument of map, filter, fold, any, all")
        return self.call(node)

    def column(self, name: str) -> Arg:
        if name in self.scope:
            return self.scope[name]
        if name not in self.columns:
            self.columns.append(name)
        if name == "__time" and self.time_column:  # the row's timestamp, epoch millis
            return Arg(_ident(self.time_column), "long")
        return Arg(_ident(name), self.types.get(name, "string"))

    def array_literal(self, node: Node) -> Arg:
        values = [self.emit(e) for e in node.args]
        kind = node.value
        if kind is None:
            kinds = {v.kind for v in values if v.sql != "NULL"}
            if kinds and kinds <= set(NUMERIC):
                kind = "array<double>" if "double" in kinds else "array<long>"
            else:
                kind = "array<string>"
        elem = element_kind(kind)
        items = [cast_to(v, elem) for v in values]
        return Arg(f"CAST(array({', '.join(items)}) AS {SPARK_TYPE[kind]})", kind)

    def op(self, node: Node) -> Arg:
        op = node.value
        a, b = (self.emit(x) for x in node.args)
        if op in ("&&", "||"):
            word = "AND" if op == "&&" else "OR"  # Spark's AND/OR are three-valued, as Druid's
            return Arg(as_long_bool(f"{truth(a)} {word} {truth(b)}"), "long")
        stringy = _is_text(node.args[0], a) or _is_text(node.args[1], b)
        if op in _COMPARE:
            return Arg(as_long_bool(_compare(op, a, b, stringy)), "long")
        if op == "+" and stringy:
            return Arg(f"concat({text(a)}, {text(b)})", "string")
        left, right = num(a), num(b)
        both_long = a.kind == "long" and b.kind == "long"
        if op == "^":
            return Arg(f"power({left}, {right})", "double")
        if op == "/":
            if both_long:  # Druid: long / long is integer division
                return Arg(f"(CASE WHEN {right} = 0 THEN NULL ELSE {left} DIV {right} END)", "long")
            return Arg(f"try_divide({left}, {right})", "double")
        if op == "%":
            return Arg(f"try_mod({left}, {right})", "long" if both_long else "double")
        return Arg(f"({left} {op} {right})", "long" if both_long else "double")

    def call(self, node: Node) -> Arg:
        name = node.value
        if name in _APPLY:
            return self.apply(node)
        if name not in FUNCTIONS:
            if name in REFUSED:
                raise ExpressionError(f"function {name}() is not supported: {REFUSED[name]}")
            raise ExpressionError(f"function {name}() is not supported: {_unknown(name)}")
        function = FUNCTIONS[name]
        lo, hi = function.arity
        if len(node.args) < lo or (hi is not None and len(node.args) > hi):
            want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi else f"at least {lo}"
            raise ExpressionError(f"{name}() takes {want} arguments, not {len(node.args)}")
        sql, kind = function.emit([self.emit(arg) for arg in node.args])
        return Arg(sql, kind)

    def apply(self, node: Node) -> Arg:
        """map/filter/fold/any/all with a lambda, as Spark's higher-order functions."""
        name, args = node.value, node.args
        if name.startswith("cartesian_"):
            return self.cartesian(node)
        want = 3 if name == "fold" else 2
        if len(args) != want or args[0].kind != "lambda":
            raise ExpressionError(f"{name}() takes a lambda and {want - 1} more arguments")
        params, body = args[0].value, args[0].args[0]
        arr, kind = array(self.emit(args[1]))
        init = self.emit(args[2]) if name == "fold" else None
        if len(params) != (2 if name == "fold" else 1):
            raise ExpressionError(
                f"{name}(): the lambda takes {2 if name == 'fold' else 1} arguments"
            )
        names = self.fresh(len(params))
        bound = [Arg(names[0], element_kind(kind))] + ([Arg(names[1], init.kind)] if init else [])
        result = self.body(params, bound, body)
        x = names[0]
        if name == "map":
            return Arg(f"transform({arr}, {x} -> {result.sql})", f"array<{_scalar(result.kind)}>")
        if name == "filter":
            kept = f"filter({arr}, {x} -> {truth(result)})"
            return Arg(f"(CASE WHEN size({kept}) > 0 THEN {kept} END)", kind)
        if name in ("any", "all"):
            spark = "exists" if name == "any" else "forall"
            return Arg(as_long_bool(f"{spark}({arr}, {x} -> {truth(result)})"), "long")
        step = cast_to(result, init.kind)
        return Arg(
            f"aggregate({arr}, {cast_to(init, init.kind)}, ({names[1]}, {x}) -> {step})", init.kind
        )

    def cartesian(self, node: Node) -> Arg:
        """cartesian_map / cartesian_fold: the lambda over every combination of
        the arrays' elements (nested transforms, flattened)."""
        name, args = node.value, node.args
        folding = name == "cartesian_fold"
        inputs = args[1:-1] if folding else args[1:]
        if not args or args[0].kind != "lambda" or not inputs:
            raise ExpressionError(f"{name}() takes a lambda and its arrays")
        params, body = args[0].value, args[0].args[0]
        if len(params) != len(inputs) + folding:
            raise ExpressionError(f"{name}(): the lambda takes one argument per array")
        arrays = [array(self.emit(a)) for a in inputs]
        names = self.fresh(len(inputs))
        if not folding:
            bound = [Arg(n, element_kind(k)) for n, (_, k) in zip(names, arrays, strict=True)]
            result = self.body(params, bound, body)
            return Arg(_product(arrays, names, result.sql), f"array<{_scalar(result.kind)}>")
        init = self.emit(args[-1])
        row, acc = self.fresh(2)
        bound = [
            Arg(f"{row}.{n}", element_kind(k)) for n, (_, k) in zip(names, arrays, strict=True)
        ]
        result = self.body(params, [*bound, Arg(acc, init.kind)], body)
        rows = _product(
            arrays, names, "named_struct(" + ", ".join(f"'{n}', {n}" for n in names) + ")"
        )
        step = cast_to(result, init.kind)
        return Arg(
            f"aggregate({rows}, {cast_to(init, init.kind)}, ({acc}, {row}) -> {step})", init.kind
        )

    def fresh(self, count: int) -> list[str]:
        """New lambda variable names (never an input column's)."""
        self.lambdas += count
        return [f"_l{i}" for i in range(self.lambdas - count + 1, self.lambdas + 1)]

    def body(self, params: list[str], bound: list[Arg], body: Node) -> Arg:
        """A lambda's body, its parameters shadowing input columns of their names."""
        saved = dict(self.scope)
        self.scope.update(zip(params, bound, strict=True))
        try:
            return self.emit(body)
        finally:
            self.scope = saved


def _product(arrays: list[tuple[str, str]], names: list[str], inner: str) -> str:
    for (arr, _), n in reversed(list(zip(arrays, names, strict=True))):
        inner = f"transform({arr}, {n} -> {inner})"
    for _ in arrays[1:]:
        inner = f"flatten({inner})"
    return inner


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


def _unknown(name: str) -> str:
    """Why an unknown function is refused, and what to use when it is a Druid SQL name."""
    if name in _SQL_NAMES:
        return f"it is a Druid SQL function; the native expression uses {_SQL_NAMES[name]}"
    if name.startswith("mv_"):
        return "it is a Druid SQL function; native expressions use the array_* functions"
    return (
        "it is not one of the functions of Druid's expression reference "
        "(docs/druid-expression-status.md lists them and their status here)"
    )


def _compare(op: str, a: Arg, b: Arg, stringy: bool) -> str:
    """Text compares as text, numbers as numbers; two input columns (text here,
    even when JSON held numbers) compare as numbers when both read as numbers."""
    sign = _COMPARE[op]
    if stringy:
        return f"{text(a)} {sign} {text(b)}"
    if a.kind in NUMERIC or b.kind in NUMERIC:
        return f"{num(a)} {sign} {num(b)}"
    numbers = f"{num(a)} IS NOT NULL AND {num(b)} IS NOT NULL"
    return f"CASE WHEN {numbers} THEN {num(a)} {sign} {num(b)} ELSE {text(a)} {sign} {text(b)} END"


def _scalar(kind: str) -> str:
    return kind if kind in ("long", "double", "string") else "string"


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


def _is_text(node: Node, arg: Arg) -> bool:
    """Whether `+` concatenates and comparisons compare as text: a string literal or
    a function returning text. Input columns are text here but compare as numbers
    against numbers (JSON/CSV numbers arrive as text)."""
    if node.kind == "col" or (node.kind == "call" and node.value in _MAYBE_NUMBER):
        return False
    return arg.kind in ("string", "json")


def translate(
    source: str, types: dict[str, str] | None = None, *, time_column: str | None = None
) -> Translated:
    """A Druid expression as a Spark SQL expression; raises ExpressionError.

    `types` maps input columns to long/double/string where known (the worker
    passes the input's column types; validation passes none). `time_column`
    names the column holding the row's timestamp in epoch millis, which the
    expression reads as `__time` (as Druid's transforms do)."""
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError("is required (a Druid expression)")
    emitter = _Emitter(types, time_column)
    result = emitter.emit(_Parser(source).parse())
    sql = result.sql
    if result.kind == "string" and sql == "NULL":
        sql = "CAST(NULL AS STRING)"
    return Translated(sql=sql, columns=tuple(emitter.columns), kind=result.kind)


def translate_predicate(
    source: str, types: dict[str, str] | None = None, *, time_column: str | None = None
) -> Translated:
    """A Druid expression used as a filter (Druid's `expression` filter): a Spark
    boolean, true where the value is true in Druid's sense (a positive number,
    the text 'true'), false where it is false or null."""
    result = translate(source, types, time_column=time_column)
    truthy = truth(Arg(result.sql, result.kind))
    return Translated(sql=f"coalesce({truthy}, false)", columns=result.columns, kind="boolean")


def parse_expression(text: str) -> Node:
    """A Druid expression's parse tree, for emitters other than Spark SQL (native
    queries emit it for DuckDB); raises ExpressionError for what does not parse."""
    return _Parser(text).parse()
