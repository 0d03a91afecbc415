"""Druid filters (validated by `metastore.druid.filters`) as Spark SQL text.

`col_of(name)` gives the SQL of a column as Druid's filters see it: its value as
text (null when absent; an array or object as JSON text); `__time` is the row's
timestamp in epoch millis. Every filter is true or false, never null: a null
value matches only `null` filters, an `in` or `selector` for null, and the
negations of the others. An expression filter naming a column the input lacks
reads it as null, as Druid does.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from metastore.druid.expressions import translate_predicate
from metastore.druid.filters import comparison_columns
from metastore.intervals import Interval

ColumnOf = Callable[[str], str]


def sql_str(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _never_null(cond: str) -> str:
    return f"coalesce({cond}, false)"


def _selector(flt: dict, value: str) -> str:
    target = flt.get("value")
    if target is None:
        return f"({value} IS NULL)"
    return _never_null(f"{value} = {sql_str(str(target))}")


def _in(flt: dict, value: str) -> str:
    values = [v for v in flt["values"] if v is not None]
    cond = f"{value} IN ({', '.join(sql_str(str(v)) for v in values)})" if values else "false"
    if len(values) != len(flt["values"]):
        cond = f"{cond} OR {value} IS NULL"
    return _never_null(cond)


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
    return _never_null(" AND ".join(conds) or "true")


def _typed(value: str, kind: str) -> str:
    return value if kind.upper() == "STRING" else f"try_cast({value} AS DOUBLE)"


def _literal(given, kind: str) -> str:
    text = sql_str(str(given).lower() if isinstance(given, bool) else str(given))
    return text if kind.upper() == "STRING" else f"CAST({text} AS DOUBLE)"


def _equals(flt: dict, value: str) -> str:
    kind = flt["matchValueType"]
    return _never_null(f"{_typed(value, kind)} = {_literal(flt['matchValue'], kind)}")


def _range(flt: dict, value: str) -> str:
    kind = flt["matchValueType"]
    subject = _typed(value, kind)
    conds = []
    for key, open_key, op in (("lower", "lowerOpen", ">"), ("upper", "upperOpen", "<")):
        if flt.get(key) is not None:
            is_open = str(flt.get(open_key)).lower() == "true"
            conds.append(f"{subject} {op if is_open else op + '='} {_literal(flt[key], kind)}")
    return _never_null(f"{subject} IS NOT NULL AND " + " AND ".join(conds))


def _like(flt: dict, value: str) -> str:
    pattern = flt["pattern"]
    # Without `escape` Druid has no escape character: pick one the pattern lacks.
    escape = flt.get("escape") or next(c for c in "\x01\x02\x03\x04\x05" if c not in pattern)
    return _never_null(f"{value} LIKE {sql_str(pattern)} ESCAPE {sql_str(escape)}")


def _regex(flt: dict, value: str) -> str:
    # Java's Matcher.find, as Druid: the pattern may match anywhere in the value.
    return _never_null(f"{value} RLIKE {sql_str(flt['pattern'])}")


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
    return _never_null(f"{value} IS NOT NULL AND " + " AND ".join(conds))


def _interval(flt: dict, value: str) -> str:
    from metastore.druid.granularity import expand_interval

    millis = f"try_cast({value} AS DOUBLE)"
    spans = []
    for text in flt["intervals"]:
        iv = Interval.parse(expand_interval(text))
        start, end = (round(t.timestamp() * 1000) for t in (iv.start, iv.end))
        spans.append(f"({millis} >= {start} AND {millis} < {end})")
    return _never_null(" OR ".join(spans))


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
    a null row contains nothing, not even null."""
    elements = (
        f"CASE WHEN startswith(ltrim({value}), '[') THEN from_json({value}, 'array<string>') "
        f"WHEN {value} IS NOT NULL THEN array({value}) END"  # a null row holds nothing
    )
    target = flt.get("elementMatchValue")
    if target is None:
        return _never_null(f"exists({elements}, e -> e IS NULL)")
    kind = flt["elementMatchValueType"]
    element = "e" if kind.upper() == "STRING" else "try_cast(e AS DOUBLE)"
    return _never_null(f"exists({elements}, e -> {element} = {_literal(target, kind)})")


def _expression(flt: dict, kinds: dict[str, str] | None) -> str:
    """An expression filter; columns the input lacks (known from `kinds`) are null:
    each is a lambda variable holding null, which shadows the column name."""
    translated = translate_predicate(flt["expression"], kinds)
    sql = translated.sql
    if kinds is None:
        return sql
    for name in dict.fromkeys(translated.columns):
        if name not in kinds and name != "__time":
            var = "`" + name.replace("`", "``") + "`"
            sql = f"element_at(transform(array(CAST(NULL AS STRING)), {var} -> {sql}), 1)"
    return sql


def filter_sql(flt: dict, col_of: ColumnOf, kinds: dict[str, str] | None = None) -> str:
    """SQL of a Druid filter; never null. `kinds` are the input columns' Druid
    types (long/double/string/complex), for expression filters."""
    kind = flt["type"]
    if kind in ("and", "or"):
        parts = [filter_sql(sub, col_of, kinds) for sub in flt["fields"]]
        joiner = " AND " if kind == "and" else " OR "
        return "(" + (joiner.join(parts) or ("true" if kind == "and" else "false")) + ")"
    if kind == "not":
        return f"(NOT {filter_sql(flt['field'], col_of, kinds)})"
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
    return _LEAVES[kind](flt, value)
