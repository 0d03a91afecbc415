"""Parse a Druid expression into its tree (`metastore.druid.expressions.tree`).

Lark's LALR(1) parser over the grammar of `grammar.py`, building the immutable
tree while it parses (no intermediate parse tree). Parsing is cached: a spec's
expressions are parsed when it is validated and again when its task runs.
Pure: no Spark or Django import.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache

from lark import Lark, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError

from metastore.druid.expressions import tree
from metastore.druid.expressions.grammar import GRAMMAR
from metastore.druid.expressions.types import ExpressionError

__all__ = ["parse"]

_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "f": "\f", "r": "\r"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)


def _unescape(quoted: str) -> str:
    """A quoted token's text, with Java's escapes read (as Druid's
    StringEscapeUtils.unescapeJava does: an unknown escape is its character)."""

    def one(m: re.Match) -> str:
        code = m.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)

    return _ESCAPE.sub(one, quoted[1:-1])


def _double(text: str) -> tree.DoubleLiteral:
    return tree.DoubleLiteral(float(text), text)


# Druid's binary operators by precedence (Expr.g4, listed loosest first there as
# here); `^` alone is right-associative.
PRECEDENCE = {"||": 1, "&&": 1, "<": 2, "<=": 2, ">": 2, ">=": 2, "==": 2, "!=": 2}
PRECEDENCE.update({"+": 3, "-": 3, "*": 4, "/": 4, "%": 4, "^": 5})


def _nest(items: list) -> tree.Expr:
    """An operator chain (operand, operator, operand...) as a tree, by precedence."""
    operands, operators = [items[0]], []

    def reduce() -> None:
        right, left = operands.pop(), operands.pop()
        operands.append(tree.Binary(operators.pop(), left, right))

    for op, operand in zip(items[1::2], items[2::2], strict=True):
        op, rank = str(op), PRECEDENCE[str(op)]
        while operators and (
            PRECEDENCE[operators[-1]] > rank or (PRECEDENCE[operators[-1]] == rank and op != "^")
        ):
            reduce()
        operators.append(op)
        operands.append(operand)
    while operators:
        reduce()
    return operands[0]


class _Build(Transformer):
    """Lark callbacks, one per rule alias, returning tree nodes."""

    def chain(self, children):
        return _nest(children)

    def neg(self, children):
        (operand,) = children
        if isinstance(operand, tree.LongLiteral):  # Druid folds a negated literal
            return tree.LongLiteral(-operand.value)
        if isinstance(operand, tree.DoubleLiteral):
            return tree.DoubleLiteral(-operand.value, "-" + operand.text)
        return tree.Unary("-", operand)

    def not_(self, children):
        return tree.Unary("!", children[0])

    def identifier(self, children):
        return tree.Identifier(str(children[0]))

    def quoted_identifier(self, children):
        return tree.Identifier(_unescape(str(children[0])))

    def long(self, children):
        return tree.LongLiteral(int(children[0]))

    def double(self, children):
        return _double(str(children[0]))

    def string(self, children):
        return tree.StringLiteral(_unescape(str(children[0])))

    def null(self, children):
        return tree.NullLiteral()

    def negative(self, children):
        sign, number = children
        if sign != "-":
            raise ExpressionError(f"an array element is a literal, not {sign}{number}")
        text = str(number)
        return tree.LongLiteral(-int(text)) if text.isdigit() else _double("-" + text)

    def array(self, children):
        kind, *elements = children
        if kind is not None:
            kind = str(kind).strip("<>") if kind.startswith("<") else str(kind)[len("ARRAY<") : -1]
        return tree.ArrayLiteral(kind, tuple(e for e in elements if e is not None))

    def call(self, children):
        name, *args = children
        return tree.Call(str(name).lower(), tuple(a for a in args if a is not None))

    def lambda_(self, children):
        head, body = children
        params = re.findall(r"[_$a-zA-Z][_$a-zA-Z0-9]*", str(head))
        return tree.Lambda(tuple(params), body)


# `lambda` is a Python keyword: the rule's callback is registered under its name.
setattr(_Build, "lambda", _Build.lambda_)


@cache
def _parser() -> Lark:
    return Lark(GRAMMAR, parser="lalr", lexer="contextual", transformer=_Build())


def _where(exc: UnexpectedInput, text: str) -> str:
    pos = getattr(exc, "pos_in_stream", None)
    if isinstance(exc, UnexpectedEOF) or pos is None or pos >= len(text):
        return "unexpected end of expression"
    if isinstance(exc, UnexpectedCharacters):
        return f"at position {pos}: unexpected {text[pos : pos + 10]!r}"
    token = getattr(exc, "token", None)
    if token is not None and token.type == "$END":
        return "unexpected end of expression"
    return f"at position {pos}: unexpected {str(token) if token is not None else text[pos]!r}"


_QUOTED = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")
MAX_NESTING = 200


def _nesting(text: str) -> int:
    """How deep parentheses and brackets nest outside quotes."""
    depth = deepest = 0
    for char in _QUOTED.sub("", text):
        if char in "([":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]":
            depth -= 1
    return deepest


def parse(text: str) -> tree.Expr:
    """The tree of a Druid expression; raises ExpressionError naming the position
    where it stops parsing, or when it nests deeper than MAX_NESTING (a hostile
    expression, which the emitters' recursion could not walk)."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("is required (a Druid expression)")
    if _nesting(text) > MAX_NESTING:
        raise ExpressionError(f"nests parentheses deeper than {MAX_NESTING} levels")
    return _parse(text)


@lru_cache(maxsize=4096)
def _parse(text: str) -> tree.Expr:
    try:
        return _parser().parse(text)
    except UnexpectedInput as exc:
        raise ExpressionError(f"cannot parse {text!r}: {_where(exc, text)}") from None
    except VisitError as exc:
        raise ExpressionError(f"cannot parse {text!r}: {exc.orig_exc}") from None
    except RecursionError:
        raise ExpressionError(f"cannot parse {text[:40]!r}...: nested too deeply") from None
