"""Druid's native expression language (transformSpec.transforms) translated to Spark SQL.

`translate(text)` parses a Druid expression (literals, identifiers bare or in
double quotes, unary `-` / `!`, `^ * / % + - < <= > >= == != && ||`, function
calls) and returns an equivalent Spark SQL expression string plus the input
columns it reads. A function Druid has but Strata does not translate is refused
by name (`ExpressionError`), so a spec never runs with a transform silently
changed. Pure: no Spark or Django import; the workers evaluate the result with
`F.expr`.

Typing follows Druid where it matters for ingestion: identifiers are read as
they come from the input (strings from JSON/CSV text), so arithmetic casts its
operands to numbers (long when both are integral literals or long-looking, double
otherwise is decided by Spark's `try_cast`): `number * 3` on "100" gives 300.
String functions cast their operands to strings. Druid's `null` is SQL NULL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ExpressionError", "FUNCTIONS", "Translated", "translate"]


class ExpressionError(ValueError):
    """The expression does not parse, or uses a function Strata cannot translate."""


@dataclass(frozen=True)
class Translated:
    sql: str  # a Spark SQL expression
    columns: tuple[str, ...]  # input columns read, in order of first use


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?)
      | (?P<str>'(?:[^'\\]|\\.)*')
      | (?P<qid>"(?:[^"\\]|\\.)*")
      | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
      | (?P<op>&&|\|\||<=|>=|==|!=|[-+*/%^<>!(),\[\]])
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


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class _Node:
    kind: str  # "num", "str", "null", "col", "call", "op", "neg", "not"

    def __init__(self, kind: str, value=None, args=()):
        self.kind = kind
        self.value = value
        self.args = list(args)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ExpressionError(
                    f"cannot parse {text!r} at position {pos}: {text[pos : pos + 10]!r}"
                )
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.text = text

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            want = f"{value!r}" if value else "more input"
            raise ExpressionError(f"cannot parse {self.text!r}: expected {want}")
        self.i += 1
        return tok

    def parse(self) -> _Node:
        node = self.binary(0)
        if self.peek() is not None:
            raise ExpressionError(f"cannot parse {self.text!r}: unexpected {self.peek()[1]!r}")
        return node

    def binary(self, level: int) -> _Node:
        if level == len(_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while (tok := self.peek()) is not None and tok[0] == "op" and tok[1] in _LEVELS[level]:
            self.take()
            # ^ is right-associative in Druid
            right = self.binary(level if tok[1] == "^" else level + 1)
            left = _Node("op", tok[1], [left, right])
        return left

    def unary(self) -> _Node:
        tok = self.peek()
        if tok and tok[0] == "op" and tok[1] in ("-", "!"):
            self.take()
            operand = self.unary()
            if tok[1] == "-" and operand.kind == "num":
                return _Node("num", "-" + operand.value)
            return _Node("neg" if tok[1] == "-" else "not", None, [operand])
        return self.primary()

    def primary(self) -> _Node:
        kind, value = self.take()
        if kind == "num":
            return _Node("num", value)
        if kind == "str":
            return _Node("str", _unquote(value))
        if kind == "qid":
            return _Node("col", _unquote(value))
        if kind == "id":
            nxt = self.peek()
            if nxt is not None and nxt[1] == "(":
                self.take("(")
                args = []
                if self.peek() is not None and self.peek()[1] != ")":
                    args.append(self.binary(0))
                    while self.peek() is not None and self.peek()[1] == ",":
                        self.take(",")
                        args.append(self.binary(0))
                self.take(")")
                return _Node("call", value.lower(), args)
            if value == "null":
                return _Node("null")
            return _Node("col", value)
        if value == "(":
            node = self.binary(0)
            self.take(")")
            return node
        if value == "[":
            raise ExpressionError("array literals are not supported in transforms")
        raise ExpressionError(f"cannot parse {self.text!r}: unexpected {value!r}")


# --- translation ---------------------------------------------------------------------


def _str_arg(sql: str) -> str:
    return f"CAST({sql} AS STRING)"


def _fixed(name: str, arity: tuple[int, ...] | None, template):
    return name, (arity, template)


def _concat(args):
    # Druid's concat is null if any argument is null (SQL semantics).
    return "concat(" + ", ".join(_str_arg(a) for a in args) + ")"


FUNCTIONS: dict[str, tuple[tuple[int, ...] | None, object]] = dict(
    [
        _fixed("concat", None, _concat),
        _fixed("upper", (1,), lambda a: f"upper({_str_arg(a[0])})"),
        _fixed("lower", (1,), lambda a: f"lower({_str_arg(a[0])})"),
        _fixed("strlen", (1,), lambda a: f"char_length({_str_arg(a[0])})"),
        _fixed("trim", (1,), lambda a: f"trim({_str_arg(a[0])})"),
        _fixed("ltrim", (1,), lambda a: f"ltrim({_str_arg(a[0])})"),
        _fixed("rtrim", (1,), lambda a: f"rtrim({_str_arg(a[0])})"),
        _fixed("reverse", (1,), lambda a: f"reverse({_str_arg(a[0])})"),
        # Druid's substring(expr, index, length) is 0-based; length -1 means "to the end".
        _fixed(
            "substring",
            (3,),
            lambda a: (
                f"CASE WHEN {_num(a[2])} < 0 THEN substring({_str_arg(a[0])}, {_num(a[1])} + 1) "
                f"ELSE substring({_str_arg(a[0])}, {_num(a[1])} + 1, {_num(a[2])}) END"
            ),
        ),
        _fixed("left", (2,), lambda a: f"left({_str_arg(a[0])}, {_num(a[1])})"),
        _fixed("right", (2,), lambda a: f"right({_str_arg(a[0])}, {_num(a[1])})"),
        _fixed(
            "replace",
            (3,),
            lambda a: f"replace({_str_arg(a[0])}, {_str_arg(a[1])}, {_str_arg(a[2])})",
        ),
        _fixed(
            "strpos",
            (2, 3),
            lambda a: (
                f"(locate({_str_arg(a[1])}, {_str_arg(a[0])}"
                + (f", {_num(a[2])} + 1" if len(a) == 3 else "")
                + ") - 1)"
            ),
        ),
        _fixed("like", (2,), lambda a: f"({_str_arg(a[0])} LIKE {_str_arg(a[1])})"),
        _fixed(
            "regexp_extract",
            (2, 3),
            lambda a: (
                f"regexp_extract({_str_arg(a[0])}, {_str_arg(a[1])}, "
                + (a[2] if len(a) == 3 else "0")
                + ")"
            ),
        ),
        _fixed("regexp_like", (2,), lambda a: f"regexp_like({_str_arg(a[0])}, {_str_arg(a[1])})"),
        _fixed("lpad", (3,), lambda a: f"lpad({_str_arg(a[0])}, {_num(a[1])}, {_str_arg(a[2])})"),
        _fixed("rpad", (3,), lambda a: f"rpad({_str_arg(a[0])}, {_num(a[1])}, {_str_arg(a[2])})"),
        _fixed("nvl", (2,), lambda a: f"coalesce({a[0]}, {a[1]})"),
        _fixed("coalesce", None, lambda a: "coalesce(" + ", ".join(a) + ")"),
        _fixed("isnull", (1,), lambda a: f"({a[0]} IS NULL)"),
        _fixed("notnull", (1,), lambda a: f"({a[0]} IS NOT NULL)"),
        _fixed("if", (3,), lambda a: f"CASE WHEN {_bool(a[0])} THEN {a[1]} ELSE {a[2]} END"),
        _fixed("abs", (1,), lambda a: f"abs({_num(a[0])})"),
        _fixed("ceil", (1,), lambda a: f"CAST(ceil({_num(a[0])}) AS DOUBLE)"),
        _fixed("floor", (1,), lambda a: f"CAST(floor({_num(a[0])}) AS DOUBLE)"),
        _fixed(
            "round",
            (1, 2),
            lambda a: f"round({_num(a[0])}, " + (a[1] if len(a) == 2 else "0") + ")",
        ),
        _fixed("sqrt", (1,), lambda a: f"sqrt({_num(a[0])})"),
        _fixed("exp", (1,), lambda a: f"exp({_num(a[0])})"),
        _fixed("log", (1,), lambda a: f"ln({_num(a[0])})"),
        _fixed("log10", (1,), lambda a: f"log10({_num(a[0])})"),
        _fixed("pow", (2,), lambda a: f"power({_num(a[0])}, {_num(a[1])})"),
        _fixed("greatest", None, lambda a: "greatest(" + ", ".join(_num(x) for x in a) + ")"),
        _fixed("least", None, lambda a: "least(" + ", ".join(_num(x) for x in a) + ")"),
        _fixed(
            "div",
            (2,),
            lambda a: f"div(CAST({_num(a[0])} AS BIGINT), CAST({_num(a[1])} AS BIGINT))",
        ),
        _fixed("cast", (2,), lambda a: _cast(a)),
        # timestamps (epoch millis, as in Druid)
        _fixed("timestamp", (1, 2), lambda a: _timestamp(a)),
        _fixed("unix_timestamp", (1, 2), lambda a: f"(({_timestamp(a)}) DIV 1000)"),
        _fixed(
            "timestamp_format",
            (1, 2, 3),
            lambda a: (
                f"date_format(timestamp_millis(CAST({_num(a[0])} AS BIGINT)), "
                + (_str_arg(a[1]) if len(a) > 1 else "'yyyy-MM-dd''T''HH:mm:ss.SSS''Z'''")
                + ")"
            ),
        ),
        # nested JSON, stored as JSON text (see specs: json/auto dimensions)
        _fixed("parse_json", (1,), lambda a: f"to_json(try_parse_json({_str_arg(a[0])}))"),
        _fixed("try_parse_json", (1,), lambda a: f"to_json(try_parse_json({_str_arg(a[0])}))"),
        _fixed("to_json_string", (1,), lambda a: f"to_json({a[0]})"),
        _fixed(
            "json_value",
            (2, 3),
            lambda a: f"get_json_object({_str_arg(a[0])}, {a[1]})",
        ),
        _fixed("json_query", (2,), lambda a: f"get_json_object({_str_arg(a[0])}, {a[1]})"),
    ]
)

_CAST_TYPES = {"STRING": "STRING", "LONG": "BIGINT", "DOUBLE": "DOUBLE", "FLOAT": "DOUBLE"}


def _cast(args: list[str]) -> str:
    target = args[1].strip("'").upper()
    if target not in _CAST_TYPES:
        raise ExpressionError(f"cast to {target!r} is not supported; use STRING, LONG or DOUBLE")
    if target == "STRING":
        return _str_arg(args[0])
    return f"try_cast({_num(args[0])} AS {_CAST_TYPES[target]})"


def _timestamp(args: list[str]) -> str:
    text = _str_arg(args[0])
    if len(args) == 2:
        return f"unix_millis(try_to_timestamp({text}, {args[1]}))"
    return f"unix_millis(try_cast({text} AS TIMESTAMP))"


_ARITH = {"+": "+", "-": "-", "*": "*", "/": "/", "%": "%"}
_COMPARE = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "=", "!=": "<>"}


class _Emitter:
    """Emits Spark SQL; `types` gives the input columns' types (long, double,
    string) when known: long stays long (so long / long divides as integers, as
    in Druid); text read from JSON or CSV is made a double in numeric context."""

    def __init__(self, types: dict[str, str] | None) -> None:
        self.types = types or {}
        self.columns: list[str] = []

    def num(self, node: _Node) -> tuple[str, str]:
        sql = self.emit(node)
        kind = self.type_of(node)
        if kind in ("long", "double"):
            return sql, kind
        return f"try_cast(trim(CAST({sql} AS STRING)) AS DOUBLE)", "double"

    def type_of(self, node: _Node) -> str:
        kind = node.kind
        if kind == "num":
            return "double" if ("." in node.value or "e" in node.value.lower()) else "long"
        if kind == "str":
            return "string"
        if kind == "col":
            return self.types.get(node.value, "string")
        if kind in ("neg",):
            return self.type_of(node.args[0]) if self.type_of(node.args[0]) == "long" else "double"
        if kind == "not":
            return "long"
        if kind == "op":
            op = node.value
            if op in _COMPARE or op in ("&&", "||"):
                return "long"
            if op == "+" and (_is_string(node.args[0]) or _is_string(node.args[1])):
                return "string"
            if op == "^":
                return "double"
            kinds = {self.type_of(a) for a in node.args}
            return "long" if kinds == {"long"} else "double"
        if kind == "call":
            return _CALL_TYPES.get(node.value, "any")
        return "any"

    def emit(self, node: _Node) -> str:
        kind = node.kind
        if kind == "num":
            return node.value if self.type_of(node) == "double" else f"{node.value}L"
        if kind == "str":
            return _sql_string(node.value)
        if kind == "null":
            return "NULL"
        if kind == "col":
            if node.value not in self.columns:
                self.columns.append(node.value)
            return _ident(node.value)
        if kind == "neg":
            return f"(- {self.num(node.args[0])[0]})"
        if kind == "not":
            return f"(CASE WHEN {self.truth(node.args[0])} THEN 0L ELSE 1L END)"
        if kind == "op":
            return self.op(node)
        return self.call(node)

    def truth(self, node: _Node) -> str:
        """Druid truthiness: a non-zero number, or the string 'true'."""
        sql = self.emit(node)
        if self.type_of(node) in ("long", "double"):
            return f"coalesce({sql} <> 0, false)"
        return (
            f"coalesce(lower(CAST({sql} AS STRING)) = 'true' "
            f"OR try_cast(CAST({sql} AS STRING) AS DOUBLE) <> 0, false)"
        )

    def op(self, node: _Node) -> str:
        op = node.value
        a, b = node.args
        if op in ("&&", "||"):
            word = "AND" if op == "&&" else "OR"
            return f"(CASE WHEN {self.truth(a)} {word} {self.truth(b)} THEN 1L ELSE 0L END)"
        if op in _COMPARE:
            if _is_string(a) or _is_string(b):
                left, right = _str_arg(self.emit(a)), _str_arg(self.emit(b))
            else:
                left, right = self.num(a)[0], self.num(b)[0]
            return f"(CASE WHEN {left} {_COMPARE[op]} {right} THEN 1L ELSE 0L END)"
        if op == "+" and (_is_string(a) or _is_string(b)):
            return f"concat({_str_arg(self.emit(a))}, {_str_arg(self.emit(b))})"
        (left, lk), (right, rk) = self.num(a), self.num(b)
        if op == "^":
            return f"power({left}, {right})"
        if op == "/":
            if lk == rk == "long":  # Druid: long / long is integer division
                return f"CAST(try_divide({left}, {right}) AS BIGINT)"
            return f"try_divide({left}, {right})"
        if op == "%" and lk == rk == "long":
            return f"try_mod({left}, {right})"
        return f"({left} {_ARITH[op]} {right})"

    def call(self, node: _Node) -> str:
        name = node.value
        if name not in FUNCTIONS:
            raise ExpressionError(
                f"function {name}() is not supported in transforms; supported: "
                + ", ".join(sorted(FUNCTIONS))
            )
        arity, template = FUNCTIONS[name]
        if arity is not None and len(node.args) not in arity:
            raise ExpressionError(f"{name}() takes {' or '.join(map(str, arity))} arguments")
        if arity is None and not node.args:
            raise ExpressionError(f"{name}() needs at least one argument")
        args = []
        for arg in node.args:
            sql = self.emit(arg)
            args.append(_Arg(sql, self.type_of(arg), self))
        return template(args)


class _Arg(str):
    """An emitted argument: its SQL text, its type, and its numeric form."""

    def __new__(cls, sql: str, kind: str, emitter: _Emitter):
        obj = super().__new__(cls, sql)
        obj.kind = kind
        return obj


def _num(arg) -> str:
    if getattr(arg, "kind", None) in ("long", "double"):
        return str(arg)
    return f"try_cast(trim(CAST({arg} AS STRING)) AS DOUBLE)"


def _bool(arg) -> str:
    if getattr(arg, "kind", None) in ("long", "double"):
        return f"coalesce({arg} <> 0, false)"
    return (
        f"coalesce(lower(CAST({arg} AS STRING)) = 'true' "
        f"OR try_cast(CAST({arg} AS STRING) AS DOUBLE) <> 0, false)"
    )


_CALL_TYPES = {
    "concat": "string",
    "upper": "string",
    "lower": "string",
    "trim": "string",
    "ltrim": "string",
    "rtrim": "string",
    "reverse": "string",
    "substring": "string",
    "left": "string",
    "right": "string",
    "replace": "string",
    "lpad": "string",
    "rpad": "string",
    "regexp_extract": "string",
    "timestamp_format": "string",
    "parse_json": "string",
    "try_parse_json": "string",
    "to_json_string": "string",
    "json_value": "string",
    "json_query": "string",
    "strlen": "long",
    "strpos": "long",
    "like": "long",
    "regexp_like": "long",
    "isnull": "long",
    "notnull": "long",
    "timestamp": "long",
    "unix_timestamp": "long",
    "div": "long",
    "sqrt": "double",
    "exp": "double",
    "log": "double",
    "log10": "double",
    "pow": "double",
    "ceil": "double",
    "floor": "double",
}


def _is_string(node: _Node) -> bool:
    return node.kind == "str" or (
        node.kind == "call" and node.value in ("concat", "upper", "lower")
    )


def translate(text: str, types: dict[str, str] | None = None) -> Translated:
    """A Druid expression as a Spark SQL expression; raises ExpressionError.

    `types` maps input columns to long/double/string where known (the worker
    passes the input's column types; validation passes none)."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("is required (a Druid expression)")
    emitter = _Emitter(types)
    sql = emitter.emit(_Parser(text).parse())
    return Translated(sql=sql, columns=tuple(emitter.columns))
