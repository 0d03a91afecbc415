"""Druid SQL's own syntax, turned into calls the embedded engine's parser reads (no
Django). Druid SQL is Calcite's dialect; a few of its forms are not in DuckDB's
grammar: `FLOOR(t TO unit)` / `CEIL(t TO unit)`, `JSON_VALUE(x, path RETURNING
type)`, `JSON_OBJECT(KEY k VALUE v, ...)` and `JSON_OBJECT(k: v)`, `<type> ARRAY`
in a cast, `POSITION(x IN y FROM n)`, a window frame of one FOLLOWING bound
(`ROWS 1 FOLLOWING`), and `EXPLAIN PLAN FOR <query>`. Each is rewritten on DuckDB's tokens
(so a string constant, a quoted name or a comment is never touched) into a call
of an internal function (`druid_floor_to(t, 'UNIT')`, ...) that
`metastore.sql_druid` then translates on the parse tree like any Druid function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class SyntaxRefused(ValueError):
    """Druid syntax that cannot be read; the message names it."""


@dataclass(frozen=True)
class _Token:
    start: int
    end: int
    kind: str  # identifier, keyword, operator, string, number, comment
    text: str

    @property
    def word(self) -> str:
        return self.text.strip().upper() if self.kind in ("identifier", "keyword") else ""

    @property
    def symbol(self) -> str:
        return self.text.strip() if self.kind == "operator" else ""


def _tokens(sql: str) -> list[_Token]:
    import duckdb

    try:
        raw = duckdb.tokenize(sql)
    except duckdb.Error as exc:
        raise SyntaxRefused(f"cannot parse the query: {str(exc).splitlines()[0]}") from None
    kinds = {
        duckdb.token_type.identifier: "identifier",
        duckdb.token_type.keyword: "keyword",
        duckdb.token_type.operator: "operator",
        duckdb.token_type.string_const: "string",
        duckdb.token_type.numeric_const: "number",
        duckdb.token_type.comment: "comment",
    }
    out = []
    for i, (pos, kind) in enumerate(raw):
        end = raw[i + 1][0] if i + 1 < len(raw) else len(sql)
        text = sql[pos:end]
        stripped = len(text.rstrip())
        out.append(_Token(pos, pos + stripped, kinds.get(kind, "other"), text[:stripped]))
    return [t for t in out if t.kind != "comment"]


def _operators(tokens: list[_Token]) -> list[_Token]:
    """DuckDB's tokenizer keeps runs like `(),` in one operator token: split them so
    every parenthesis and comma is a token of its own."""
    out = []
    for t in tokens:
        if t.kind != "operator" or len(t.text) == 1 or t.text in ("::", "||", "<=", ">=", "<>"):
            out.append(t)
            continue
        for i, char in enumerate(t.text):
            if not char.isspace():
                out.append(_Token(t.start + i, t.start + i + 1, "operator", char))
    return out


def _closing(tokens: list[_Token], open_index: int) -> int:
    """The index of the `)` matching the `(` at `open_index`."""
    depth = 0
    for i in range(open_index, len(tokens)):
        depth += (tokens[i].symbol == "(") - (tokens[i].symbol == ")")
        if depth == 0:
            return i
    raise SyntaxRefused("cannot parse the query: a parenthesis is not closed")


def _top_level(tokens: list[_Token], open_index: int, close: int):
    """The indexes of the tokens directly inside the parentheses at `open_index`."""
    depth = 0
    for i in range(open_index + 1, close):
        symbol = tokens[i].symbol
        if symbol == "(" or symbol == "[":
            depth += 1
        elif symbol == ")" or symbol == "]":
            depth -= 1
        elif depth == 0:
            yield i


_TYPE_WORDS = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _edits_for_call(tokens: list[_Token], i: int) -> list[tuple[int, int, str]]:
    """Text edits (start, end, replacement) turning the Druid form of the call whose
    name is tokens[i] into an engine-readable call; none if it has no Druid form."""
    name = tokens[i].word
    if i + 1 >= len(tokens) or tokens[i + 1].symbol != "(":
        return []
    if name not in ("FLOOR", "CEIL", "CEILING", "JSON_VALUE", "JSON_OBJECT", "POSITION"):
        return []
    close = _closing(tokens, i + 1)
    inner = list(_top_level(tokens, i + 1, close))
    if name == "POSITION":
        return _position_from(tokens, i, inner)
    if name in ("FLOOR", "CEIL", "CEILING"):
        to = [j for j in inner if tokens[j].word == "TO"]
        if not to:
            return []
        j = to[0]
        unit = " ".join(t.word for t in tokens[j + 1 : close])
        internal = "druid_floor_to" if name == "FLOOR" else "druid_ceil_to"
        return [
            (tokens[i].start, tokens[i].end, internal),
            (tokens[j - 1].end, tokens[close].start, f", '{unit}'"),
        ]
    if name == "JSON_VALUE":
        returning = [j for j in inner if tokens[j].word == "RETURNING"]
        if not returning:
            return []
        j = returning[0]
        sql_type = " ".join(t.word or t.text for t in tokens[j + 1 : close])
        return [
            (tokens[i].start, tokens[i].end, "druid_json_value_returning"),
            (tokens[j - 1].end, tokens[close].start, f", '{sql_type}'"),
        ]
    edits = []
    for j in inner:
        if tokens[j].word == "KEY" and (j == i + 2 or tokens[j - 1].symbol == ","):
            edits.append((tokens[j].start, tokens[j].end, ""))
        elif tokens[j].word == "VALUE" or tokens[j].symbol == ":":
            edits.append((tokens[j].start, tokens[j].end, ","))
    return edits


def _position_from(tokens: list[_Token], i: int, inner: list[int]) -> list[tuple[int, int, str]]:
    """`POSITION(x IN y FROM n)`: the engine reads only `POSITION(x IN y)`."""
    word_in = [j for j in inner if tokens[j].word == "IN"]
    word_from = [j for j in inner if tokens[j].word == "FROM"]
    if not word_in or not word_from or word_from[0] < word_in[0]:
        return []
    return [
        (tokens[i].start, tokens[i].end, "druid_position_from"),
        (tokens[word_in[0]].start, tokens[word_in[0]].end, ","),
        (tokens[word_from[0]].start, tokens[word_from[0]].end, ","),
    ]


def _array_type_edits(tokens: list[_Token]) -> list[tuple[int, int, str]]:
    """`CAST(x AS VARCHAR ARRAY)`: Druid's (Calcite's) array type, DuckDB's `VARCHAR[]`."""
    edits = []
    for i in range(1, len(tokens)):
        if tokens[i].word == "ARRAY" and _TYPE_WORDS.match(tokens[i - 1].word or "-"):
            after = tokens[i + 1].symbol if i + 1 < len(tokens) else ")"
            if after in (")", ",") and tokens[i - 2].word == "AS":
                edits.append((tokens[i - 1].end, tokens[i].end, "[]"))
    return edits


def _frame_edits(tokens: list[_Token]) -> list[tuple[int, int, str]]:
    """`ROWS 1 FOLLOWING` / `ROWS UNBOUNDED FOLLOWING` (a frame written by its one bound,
    that bound after the current row): Calcite's frame from the current row to it,
    `BETWEEN CURRENT ROW AND ...`, which DuckDB's grammar does not read from one bound."""
    edits = []
    for i in range(len(tokens) - 2):
        if tokens[i].word not in ("ROWS", "RANGE") or tokens[i + 1].word == "BETWEEN":
            continue
        bound = tokens[i + 1]
        if (bound.word == "UNBOUNDED" or bound.kind == "number") and tokens[
            i + 2
        ].word == "FOLLOWING":
            edits.append((bound.start, bound.start, "BETWEEN CURRENT ROW AND "))
    return edits


_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+PLAN\s+(?:(?:WITH|WITHOUT)\s+IMPLEMENTATION\s+)?FOR\s+", re.I)


def split_explain(sql: str) -> tuple[bool, str]:
    """(whether the query asks `EXPLAIN PLAN FOR`, the query it explains)."""
    if "EXPLAIN" not in sql.upper():
        return False, sql
    tokens = _tokens(sql)
    words = [t.word for t in tokens[:6]]
    if words[:1] != ["EXPLAIN"]:
        return False, sql
    match = _EXPLAIN.match(sql)
    if match is None:
        raise SyntaxRefused("only EXPLAIN PLAN FOR <query> is supported")
    return True, sql[match.end() :]


def rewrite(sql: str) -> str:
    """The query with Druid's own forms written as engine-readable calls."""
    if not any(
        word in sql.upper()
        for word in (" TO ", "RETURNING", "JSON_OBJECT", "ARRAY", "POSITION", "FOLLOWING")
    ):
        return sql  # the common case: nothing to rewrite, no tokenizing
    tokens = _operators(_tokens(sql))
    edits = []
    for i, token in enumerate(tokens):
        if token.kind in ("identifier", "keyword"):
            edits.extend(_edits_for_call(tokens, i))
    edits.extend(_array_type_edits(tokens))
    edits.extend(_frame_edits(tokens))
    for start, end, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[end:]
    return sql
