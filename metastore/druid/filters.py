"""transformSpec.filter (and a compact task's): Druid's filter JSON, checked here
and applied by the workers."""

from __future__ import annotations

from typing import Any

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, object_at, string_at

FILTER_TYPES = ("selector", "in", "bound", "and", "or", "not")
# Filter types Druid documents that transformSpec.filter does not apply here.
UNSUPPORTED_FILTERS = (
    "equals",
    "null",
    "range",
    "columnComparison",
    "extraction",
    "search",
    "like",
    "regex",
    "interval",
    "true",
    "false",
    "arrayContainsElement",
    "expression",
    "javascript",
    "spatial",
)
_BOUND_FIELDS = {"type", "dimension", "lower", "upper", "lowerStrict", "upperStrict", "ordering"}


def _filter_type(flt: dict, path: str) -> str:
    kind = flt.get("type")
    if isinstance(kind, str) and kind in UNSUPPORTED_FILTERS:
        raise SpecError(
            f"{path}.type",
            f"{kind} filters are not implemented here; accepted: {', '.join(FILTER_TYPES)} "
            "(or compute a column with an expression transform and filter it with selector)",
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


def validate_filter(flt: Any, path: str) -> dict:
    """A filter object, checked (nested ones too); returned as given."""
    flt = object_at(flt, path)
    kind = _filter_type(flt, path)
    if kind == "selector":
        allow(flt, path, {"type", "dimension", "value"})
        string_at(flt, "dimension", path)
    elif kind == "in":
        allow(flt, path, {"type", "dimension", "values"})
        string_at(flt, "dimension", path)
        if not isinstance(flt.get("values"), list):
            raise SpecError(f"{path}.values", "must be a list")
    elif kind == "bound":
        _bound(flt, path)
    elif kind in ("and", "or"):
        allow(flt, path, {"type", "fields"})
        fields = flt.get("fields")
        if not isinstance(fields, list) or not fields:
            raise SpecError(f"{path}.fields", "must be a non-empty list of filters")
        for i, sub in enumerate(fields):
            validate_filter(sub, f"{path}.fields[{i}]")
    else:  # not
        allow(flt, path, {"type", "field"})
        validate_filter(flt.get("field"), f"{path}.field")
    return flt
