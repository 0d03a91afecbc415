"""Druid filters (validated by `metastore.druid.filters`) as Spark SQL text.

`col_of(name)` gives the SQL of a column as Druid's filters see it: its value as
text (null when absent; an array or object as JSON text); `__time` is the row's
timestamp in epoch millis.

Three-valued, as Druid's default (SQL-compatible null handling,
`useThreeValueLogicForNativeFilters`): a null value matches `null` filters and an
`in` or `selector` for null; for the other value filters (and an expression whose
value is null) it is UNKNOWN, SQL NULL here. `not` negates the three values
(Druid's `NotFilter`: `matches().negate()`), so an unknown row is kept by neither
a filter nor its `not`; `filter_sql` as a whole is never null (unknown rows are
not kept: Druid's transform filter calls `matches(false)`). An expression filter
naming a column the input lacks reads it as null, as Druid does.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from metastore.druid.expressions import translate
from metastore.druid.expressions.dialect import Arg
from metastore.druid.expressions.spark_sql import SPARK
from metastore.druid.filters import comparison_columns
from metastore.intervals import Interval

ColumnOf = Callable[[str], str]


def sql_str(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _never_null(cond: str) -> str:
    return f"coalesce({cond}, false)"


def _unknown_on_null(value: str, cond: str) -> str:
    """`cond` as true or false where `value` is not null, UNKNOWN (NULL) where it is."""
    return f"(CASE WHEN {value} IS NULL THEN NULL ELSE coalesce({cond}, false) END)"


def _selector(flt: dict, value: str) -> str:
    target = flt.get("value")
    if target is None:
        return f"({value} IS NULL)"
    return f"{value} = {sql_str(str(target))}"


def _in(flt: dict, value: str) -> str:
    values = [v for v in flt["values"] if v is not None]
    cond = f"{value} IN ({', '.join(sql_str(str(v)) for v in values)})" if values else "false"
    if len(values) != len(flt["values"]):
        return _never_null(f"{cond} OR {value} IS NULL")  # null is a match, not unknown
    return cond


def _bound(flt: dict, value: str) -> str:
    numeric = flt.get("ordering") == "numeric"
    subject = f"try_cast({value} AS DOUBLE)" if numeric else value
    conds = []
    for key, strict, op in (("lower", "lowerStrict", ">"), ("upper", "upperStrict", "<")):
        if flt.get(key) is None:
            continue
        bound = sql_str(str(flt[key]))
        bound = f"CAST({bound} AS DOUBLE)" if numeric else bound
        conds.append(f"{subject} {op if flt.get(strict) else op + '='} {bound}")
    return " AND ".join(conds) or "true"


def _typed(value: str, kind: str) -> str:
    return value if kind.upper() == "STRING" else f"try_cast({value} AS DOUBLE)"


def _literal(given, kind: str) -> str:
    text = sql_str(str(given).lower() if isinstance(given, bool) else str(given))
    return text if kind.upper() == "STRING" else f"CAST({text} AS DOUBLE)"


def _equals(flt: dict, value: str) -> str:
    kind = flt["matchValueType"]
    return f"{_typed(value, kind)} = {_literal(flt['matchValue'], kind)}"


def _range(flt: dict, value: str) -> str:
    kind = flt["matchValueType"]
    subject = _typed(value, kind)
    conds = []
    for key, open_key, op in (("lower", "lowerOpen", ">"), ("upper", "upperOpen", "<")):
        if flt.get(key) is not None:
            is_open = str(flt.get(open_key)).lower() == "true"
            conds.append(f"{subject} {op if is_open else op + '='} {_literal(flt[key], kind)}")
    return f"{subject} IS NOT NULL AND " + " AND ".join(conds)


def _like(flt: dict, value: str) -> str:
    pattern = flt["pattern"]
    # Without `escape` Druid has no escape character: pick one the pattern lacks.
    escape = flt.get("escape") or next(c for c in "\x01\x02\x03\x04\x05" if c not in pattern)
    return f"{value} LIKE {sql_str(pattern)} ESCAPE {sql_str(escape)}"


def _regex(flt: dict, value: str) -> str:
    # Java's Matcher.find, as Druid: the pattern may match anywhere in the value.
    return f"{value} RLIKE {sql_str(flt['pattern'])}"


def _search(flt: dict, value: str) -> str:
    query = flt["query"]
    sensitive = query["type"] != "insensitive_contains" and (
        str(query.get("caseSensitive")).lower() == "true"
    )
    subject = value if sensitive else f"lower({value})"
    parts = query["values"] if query["type"] == "fragment" else [query["value"]]
    conds = [f"instr({subject}, {sql_str(p if sensitive else p.lower())}) > 0" for p in parts] or [
        "true"
    ]
    return f"{value} IS NOT NULL AND " + " AND ".join(conds)


def _interval(flt: dict, value: str) -> str:
    from metastore.druid.granularity import expand_interval

    millis = f"try_cast({value} AS DOUBLE)"
    spans = []
    for text in flt["intervals"]:
        iv = Interval.parse(expand_interval(text))
        start, end = (round(t.timestamp() * 1000) for t in (iv.start, iv.end))
        spans.append(f"({millis} >= {start} AND {millis} < {end})")
    return " OR ".join(spans)


_LEAVES = {
    "selector": _selector,
    "in": _in,
    "bound": _bound,
    "equals": _equals,
    "range": _range,
    "like": _like,
    "regex": _regex,
    "search": _search,
    "interval": _interval,
}


def _array_contains_element(flt: dict, value: str) -> str:
    """Druid's arrayContainsElement: an array column contains the element (compared
    as a number for numeric match types); a scalar is a one-element array. Arrays
    reach filters as JSON text (as the workers read list values of string fields);
    a null row is unknown (Druid's predicate), matched by neither it nor its `not`."""
    elements = (
        f"CASE WHEN startswith(ltrim({value}), '[') THEN from_json({value}, 'array<string>') "
        f"WHEN {value} IS NOT NULL THEN array({value}) END"  # a null row holds nothing
    )
    target = flt.get("elementMatchValue")
    if target is None:
        return _unknown_on_null(value, f"exists({elements}, e -> e IS NULL)")
    kind = flt["elementMatchValueType"]
    element = "e" if kind.upper() == "STRING" else "try_cast(e AS DOUBLE)"
    found = f"exists({elements}, e -> {element} = {_literal(target, kind)})"
    return _unknown_on_null(value, found)


def _expression(flt: dict, kinds: dict[str, str] | None) -> str:
    """An expression filter, UNKNOWN (NULL) where the expression's value is null (as
    Druid's `ExpressionFilter`); columns the input lacks (known from `kinds`) are
    null: each is a lambda variable holding null, which shadows the column name."""
    translated = translate(flt["expression"], kinds)
    sql = SPARK.truth(Arg(translated.sql, translated.kind))
    if kinds is None:
        return sql
    for name in dict.fromkeys(translated.columns):
        if name not in kinds and name != "__time":
            var = "`" + name.replace("`", "``") + "`"
            sql = f"element_at(transform(array(CAST(NULL AS STRING)), {var} -> {sql}), 1)"
    return sql


def filter_sql(flt: dict, col_of: ColumnOf, kinds: dict[str, str] | None = None) -> str:
    """SQL of a Druid filter keeping a row, never null (an unknown row is not kept).
    `kinds` are the input columns' Druid types (long/double/string/complex), for
    expression filters."""
    return _never_null(matched_sql(flt, col_of, kinds))


def matched_sql(flt: dict, col_of: ColumnOf, kinds: dict[str, str] | None = None) -> str:
    """SQL of a Druid filter in three values: true, false or NULL (unknown); `and`,
    `or` and `not` are SQL's, which are Druid's (`AndFilter`, `OrFilter`, `NotFilter`)."""
    kind = flt["type"]
    if kind in ("and", "or"):
        parts = [matched_sql(sub, col_of, kinds) for sub in flt["fields"]]
        joiner = " AND " if kind == "and" else " OR "
        return "(" + (joiner.join(parts) or ("true" if kind == "and" else "false")) + ")"
    if kind == "not":
        return f"(NOT {matched_sql(flt['field'], col_of, kinds)})"
    if kind in ("true", "false"):
        return kind
    if kind == "null":
        return f"({col_of(flt['column'])} IS NULL)"
    if kind == "columnComparison":
        values = [col_of(name) for name in comparison_columns(flt)]
        return "(" + " AND ".join(f"{a} <=> {b}" for a, b in pairwise(values)) + ")"
    if kind == "expression":
        return _expression(flt, kinds)
    name = flt.get("dimension", flt.get("column"))
    value = f"CAST({col_of(name)} AS STRING)"
    if kind == "arrayContainsElement":
        return _array_contains_element(flt, value)
    cond = _LEAVES[kind](flt, value)
    return cond if _matches_null(flt) else _unknown_on_null(value, cond)


def _matches_null(flt: dict) -> bool:
    """A `selector` or `in` for null: a null value is a match, never unknown."""
    if flt["type"] == "selector":
        return flt.get("value") is None
    return flt["type"] == "in" and any(v is None for v in flt["values"])
