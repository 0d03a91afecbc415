"""Reading one field of a spec object: its type checked, its path named in the error.

Every sub-grammar of the Druid dialect reads JSON through these, so a bad value
is always refused with `SpecError(<dotted path>, <what would be accepted>)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from metastore.druid.errors import SpecError

T = TypeVar("T")

# Upper bounds of integer fields whose meaning caps them (issue 15); any other
# integer field is capped at Java's int range, as in Druid.
INT_MAXIMUMS = {
    "numShards": 10_000,
    "maxRetry": 100,
    "maxNumConcurrentSubTasks": 1_000,
    "totalNumMergeTasks": 1_000,
    "skipHeaderRows": 1_000_000,
    "taskLockTimeout": 7 * 24 * 3600 * 1000,  # a week, in ms
    "maxSavedParseExceptions": 10_000,
}
INT_MAXIMUM = 2**31 - 1


def at(path: str, key: str) -> str:
    """The dotted path of `key` inside the object at `path` ("" is the top level)."""
    return f"{path}.{key}" if path else key


def object_at(value: Any, path: str, *, required: bool = True) -> dict:
    """`value` as an object; absent (None) is {} unless required."""
    if value is None:
        if required:
            raise SpecError(path, "is required (an object)")
        return {}
    if not isinstance(value, dict):
        raise SpecError(path, f"must be an object, got {type(value).__name__}")
    return value


def allow(obj: dict, path: str, allowed: set[str]) -> None:
    """Refuse the first field of `obj` (in name order) that is not in `allowed`.

    A field given as null is its default: Druid's own task payloads (GET
    .../task/{id}) carry every field it knows, most of them null, so a null one
    is ignored here whatever its name."""
    unknown = sorted(k for k in set(obj) - allowed if obj[k] is not None)
    if unknown:
        raise SpecError(
            at(path, unknown[0]),
            f"unknown or unsupported field; accepted fields here: {', '.join(sorted(allowed))}",
        )


def string_at(
    obj: dict, key: str, path: str, *, required: bool = True, default: str | None = None
) -> str | None:
    """A string field; absent or "" is `default` unless required."""
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise SpecError(at(path, key), "is required (a non-empty string)")
        return default
    if not isinstance(value, str):
        raise SpecError(at(path, key), "must be a string")
    return value


def int_at(
    obj: dict,
    key: str,
    path: str,
    default: int | None,
    *,
    minimum: int = 0,
    maximum: int | None = None,
) -> int | None:
    """An integer field within [minimum, maximum] (booleans are not integers)."""
    value = obj.get(key)
    if value is None:
        return default
    if maximum is None:
        maximum = INT_MAXIMUMS.get(key, INT_MAXIMUM)
    where = at(path, key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(where, f"must be an integer from {minimum} to {maximum}")
    if value < minimum or value > maximum:
        shown = value if abs(value) < 10**20 else f"{str(value)[:12]}... ({len(str(value))} digits)"
        raise SpecError(where, f"must be an integer from {minimum} to {maximum}, got {shown}")
    return value


def bool_at(obj: dict, key: str, path: str, default: bool | None) -> bool | None:
    """A boolean; Druid (Jackson) also takes the strings "true" and "false"."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise SpecError(at(path, key), "must be true or false")
    return value


def none_as(value: Any, default: Any) -> Any:
    """A field given as null counts as absent; any other value (false, 0, "") is
    checked for its type, never taken as absent."""
    return default if value is None else value


def first_duplicate(names: Iterable[str]) -> str | None:
    """The first name (in order) that occurs more than once, or None."""
    names = list(names)
    return next((n for n in names if names.count(n) > 1), None)


def renamed(path_from: str, path_to: str, check: Callable[[], T]) -> T:
    """Run a validator written for one place of a spec (e.g. an ingestion spec's
    `spec.dataSchema.metricsSpec`), naming fields where they are here instead."""
    try:
        return check()
    except SpecError as exc:
        field_name = exc.field
        if field_name.startswith(path_from):
            field_name = path_to + field_name[len(path_from) :]
        raise SpecError(field_name, exc.message) from None


def no_projections(obj: dict, path: str) -> None:
    """`projections` (Druid's aggregate projections) are refused, naming the
    field; none (null or []), as Druid's newer task payloads carry, is no news."""
    if obj.get("projections") not in (None, []):
        raise SpecError(
            at(path, "projections"),
            "aggregate projections are not supported here; query the dataSource itself",
        )
