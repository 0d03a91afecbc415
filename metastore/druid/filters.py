"""transformSpec.filter (and a compact task's): Druid's filter JSON, checked here
and applied by the workers (`workers.jobs.filter_sql`)."""

from __future__ import annotations

from typing import Any

from metastore.druid.errors import SpecError
from metastore.druid.expressions import ExpressionError, translate_predicate
from metastore.druid.fields import allow, bool_at, object_at, string_at
from metastore.druid.granularity import interval_at

FILTER_TYPES = (
    "selector",
    "in",
    "bound",
    "and",
    "or",
    "not",
    "equals",
    "null",
    "range",
    "like",
    "regex",
    "search",
    "interval",
    "columnComparison",
    "expression",
    "arrayContainsElement",
    "true",
    "false",
)
# Filter types Druid documents that transformSpec.filter does not apply here.
UNSUPPORTED_FILTERS = ("extraction", "javascript", "spatial")
MATCH_VALUE_TYPES = ("STRING", "LONG", "DOUBLE", "FLOAT")
SEARCH_QUERY_TYPES = ("contains", "insensitive_contains", "fragment")
_BOUND_FIELDS = {"type", "dimension", "lower", "upper", "lowerStrict", "upperStrict", "ordering"}
_RANGE_FIELDS = {"type", "column", "matchValueType", "lower", "upper", "lowerOpen", "upperOpen"}


def _filter_type(flt: dict, path: str) -> str:
    kind = flt.get("type")
    if isinstance(kind, str) and kind in UNSUPPORTED_FILTERS:
        raise SpecError(
            f"{path}.type",
            f"{kind} filters are not implemented here; accepted: {', '.join(FILTER_TYPES)} "
            "(or compute a column with an expression transform and filter it)",
        )
    if kind not in FILTER_TYPES:
        raise SpecError(
            f"{path}.type", f"unknown filter type {kind!r}; accepted: {', '.join(FILTER_TYPES)}"
        )
    return kind


def _bound(flt: dict, path: str) -> None:
    allow(flt, path, _BOUND_FIELDS)
    string_at(flt, "dimension", path)
    if flt.get("lower") is None and flt.get("upper") is None:
        raise SpecError(path, "a bound filter needs lower and/or upper")
    ordering = flt.get("ordering", "lexicographic")
    if ordering not in ("lexicographic", "numeric"):
        raise SpecError(f"{path}.ordering", "must be lexicographic or numeric")


def match_value_type(flt: dict, path: str, key: str = "matchValueType") -> str:
    """A typed filter's value type, upper case: STRING, LONG, DOUBLE or FLOAT."""
    kind = string_at(flt, key, path)
    if kind.upper() not in MATCH_VALUE_TYPES:
        raise SpecError(
            f"{path}.{key}",
            f"{kind!r} is not supported here; accepted: {', '.join(MATCH_VALUE_TYPES)} "
            "(array match values are not implemented)",
        )
    return kind.upper()


def _typed_value(value: Any, kind: str, where: str) -> None:
    if isinstance(value, dict | list):
        raise SpecError(where, f"must be a {kind.lower()} value")
    if kind != "STRING":
        try:
            float(value)
        except (TypeError, ValueError):
            raise SpecError(where, f"{value!r} is not a {kind.lower()}") from None


def _equals(flt: dict, path: str) -> None:
    allow(flt, path, {"type", "column", "matchValueType", "matchValue"})
    string_at(flt, "column", path)
    kind = match_value_type(flt, path)
    if flt.get("matchValue") is None:
        raise SpecError(f"{path}.matchValue", "is required (match nulls with a null filter)")
    _typed_value(flt["matchValue"], kind, f"{path}.matchValue")


def _range(flt: dict, path: str) -> None:
    allow(flt, path, _RANGE_FIELDS)
    string_at(flt, "column", path)
    kind = match_value_type(flt, path)
    if flt.get("lower") is None and flt.get("upper") is None:
        raise SpecError(path, "a range filter needs lower and/or upper")
    for key in ("lower", "upper"):
        if flt.get(key) is not None:
            _typed_value(flt[key], kind, f"{path}.{key}")
    bool_at(flt, "lowerOpen", path, False)
    bool_at(flt, "upperOpen", path, False)


def _like(flt: dict, path: str) -> None:
    allow(flt, path, {"type", "dimension", "pattern", "escape"})
    string_at(flt, "dimension", path)
    if not isinstance(flt.get("pattern"), str):
        raise SpecError(f"{path}.pattern", "is required (a LIKE pattern such as D%)")
    escape = flt.get("escape")
    if escape is not None and (not isinstance(escape, str) or len(escape) != 1):
        raise SpecError(f"{path}.escape", "must be a single character")


def _search(flt: dict, path: str) -> None:
    allow(flt, path, {"type", "dimension", "query"})
    string_at(flt, "dimension", path)
    qpath = f"{path}.query"
    query = object_at(flt.get("query"), qpath)
    kind = query.get("type")
    if kind not in SEARCH_QUERY_TYPES:
        raise SpecError(
            f"{qpath}.type",
            f"unknown search query {kind!r}; accepted: {', '.join(SEARCH_QUERY_TYPES)}",
        )
    if kind == "fragment":
        allow(query, qpath, {"type", "values", "caseSensitive"})
        values = query.get("values")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SpecError(f"{qpath}.values", "must be a list of strings")
    else:
        allow(query, qpath, {"type", "value", "caseSensitive"})
        if not isinstance(query.get("value"), str):
            raise SpecError(f"{qpath}.value", "is required (a string)")
    bool_at(query, "caseSensitive", qpath, False)


def _interval(flt: dict, path: str) -> None:
    allow(flt, path, {"type", "dimension", "intervals"})
    string_at(flt, "dimension", path)
    intervals = flt.get("intervals")
    if not isinstance(intervals, list) or not intervals:
        raise SpecError(f"{path}.intervals", "must be a non-empty list of intervals")
    for i, value in enumerate(intervals):
        interval_at(value, f"{path}.intervals[{i}]")


def comparison_columns(flt: dict) -> list:
    """The column names of a columnComparison filter (plain or default dimension specs)."""
    return [d.get("dimension") if isinstance(d, dict) else d for d in flt.get("dimensions") or []]


def _column_comparison(flt: dict, path: str) -> None:
    allow(flt, path, {"type", "dimensions"})
    dims = flt.get("dimensions")
    if not isinstance(dims, list) or len(dims) < 2:
        raise SpecError(f"{path}.dimensions", "must list at least two dimensions")
    for i, d in enumerate(dims):
        if isinstance(d, dict):
            dpath = f"{path}.dimensions[{i}]"
            allow(d, dpath, {"type", "dimension", "outputName", "outputType"})
            if d.get("type", "default") != "default":
                raise SpecError(f"{dpath}.type", "only default dimension specs are supported")
            string_at(d, "dimension", dpath)
        elif not isinstance(d, str) or not d:
            raise SpecError(f"{path}.dimensions[{i}]", "must be a dimension name")


def _expression(flt: dict, path: str) -> None:
    allow(flt, path, {"type", "expression"})
    try:
        columns = translate_predicate(flt.get("expression")).columns
    except ExpressionError as exc:
        raise SpecError(f"{path}.expression", str(exc)) from None
    if "__time" in columns:
        raise SpecError(
            f"{path}.expression",
            "an expression filter on __time is not supported here; use an interval filter",
        )


def _array_contains_element(flt: dict, path: str) -> None:
    allow(flt, path, {"type", "column", "elementMatchValueType", "elementMatchValue"})
    string_at(flt, "column", path)
    kind = match_value_type(flt, path, "elementMatchValueType")
    if "elementMatchValue" not in flt:
        raise SpecError(f"{path}.elementMatchValue", "is required (it may be null)")
    if flt["elementMatchValue"] is not None:
        _typed_value(flt["elementMatchValue"], kind, f"{path}.elementMatchValue")


def _leaf(flt: dict, path: str, kind: str) -> None:
    if kind == "selector":
        allow(flt, path, {"type", "dimension", "value"})
        string_at(flt, "dimension", path)
    elif kind == "in":
        allow(flt, path, {"type", "dimension", "values"})
        string_at(flt, "dimension", path)
        if not isinstance(flt.get("values"), list):
            raise SpecError(f"{path}.values", "must be a list")
    elif kind == "null":
        allow(flt, path, {"type", "column"})
        string_at(flt, "column", path)
    elif kind == "regex":
        allow(flt, path, {"type", "dimension", "pattern"})
        string_at(flt, "dimension", path)
        string_at(flt, "pattern", path)
    elif kind in ("true", "false"):
        allow(flt, path, {"type"})
    else:
        _CHECKS[kind](flt, path)


_CHECKS = {
    "bound": _bound,
    "equals": _equals,
    "range": _range,
    "like": _like,
    "search": _search,
    "interval": _interval,
    "columnComparison": _column_comparison,
    "expression": _expression,
    "arrayContainsElement": _array_contains_element,
}


def validate_filter(flt: Any, path: str) -> dict:
    """A filter object, checked (nested ones too); returned as given."""
    flt = object_at(flt, path)
    kind = _filter_type(flt, path)
    if kind in ("and", "or"):
        allow(flt, path, {"type", "fields"})
        fields = flt.get("fields")
        if not isinstance(fields, list) or not fields:
            raise SpecError(f"{path}.fields", "must be a non-empty list of filters")
        for i, sub in enumerate(fields):
            validate_filter(sub, f"{path}.fields[{i}]")
    elif kind == "not":
        allow(flt, path, {"type", "field"})
        validate_filter(flt.get("field"), f"{path}.field")
    else:
        _leaf(flt, path, kind)
    return flt


def filter_columns(flt: dict | None) -> set[str]:
    """The input columns a (validated) filter reads."""
    if not flt:
        return set()
    kind = flt["type"]
    if kind in ("and", "or"):
        return set().union(*(filter_columns(f) for f in flt["fields"]))
    if kind == "not":
        return filter_columns(flt["field"])
    if kind == "columnComparison":
        return set(comparison_columns(flt))
    if kind == "expression":
        return set(translate_predicate(flt["expression"]).columns)
    name = flt.get("dimension", flt.get("column"))
    return {name} if name else set()
