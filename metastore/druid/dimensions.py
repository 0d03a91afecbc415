"""dimensionsSpec: the dimensions kept, their types and multi-value handling,
exclusions, and schema discovery."""

from __future__ import annotations

from dataclasses import dataclass

from metastore.druid.errors import SpecError
from metastore.druid.fields import (
    allow,
    bool_at,
    first_duplicate,
    none_as,
    object_at,
    string_at,
)

DIMENSION_TYPES = ("string", "long", "double", "float", "auto", "json")
MULTI_VALUE_HANDLING = ("SORTED_ARRAY", "SORTED_SET", "ARRAY")
DIMENSIONS_PATH = "spec.dataSchema.dimensionsSpec"
DIMENSIONS_SPEC_FIELDS = {
    "dimensions",
    "dimensionExclusions",
    "spatialDimensions",
    "includeAllDimensions",
    "useSchemaDiscovery",
    "forceSegmentSortByTime",
}
_SPATIAL = "spatial indexes are outside Strata's scope; ingest the coordinates as double dimensions"


@dataclass(frozen=True)
class Dimension:
    """type: string, long, double, float (Druid's 32-bit FLOAT column, stored as a
    Parquet FLOAT), json (Druid's json nested columns, stored as
    JSON text) or auto (typed by its input as Druid's `auto` is: a column of
    booleans or integers is a long dimension, booleans 1/0 as with Druid's default
    `druid.expressions.useStrictBooleans`; floating point is double; anything
    else is JSON text). A string dimension whose input value is a list is
    multi-value: stored as an array of strings ordered by `multi_value_handling`."""

    name: str
    type: str = "string"
    multi_value_handling: str = "SORTED_ARRAY"


@dataclass(frozen=True)
class DimensionsSpec:
    dimensions: tuple[Dimension, ...]
    exclusions: tuple[str, ...]
    include_all: bool  # includeAllDimensions, with dimensions listed
    schema_discovery: bool  # useSchemaDiscovery


def _dimension_type(d: dict, dpath: str) -> str:
    dtype = d.get("type", "string")
    if dtype == "spatial":
        raise SpecError(
            f"{dpath}.type",
            "spatial dimensions are outside Strata's scope; ingest the coordinates as "
            "double dimensions",
        )
    if dtype not in DIMENSION_TYPES:
        raise SpecError(
            f"{dpath}.type",
            f"unknown dimension type {dtype!r}; accepted: {', '.join(DIMENSION_TYPES)}",
        )
    return dtype


def _multi_value_handling(d: dict, dpath: str, dtype: str, ignored: list[str]) -> str | None:
    handling = d.get("multiValueHandling")
    if handling is None:
        return None
    if dtype != "string":
        # Druid accepts it on every dimension type (its own task payloads carry
        # the default on long/double ones) and uses it for strings only.
        if str(handling).upper() != "SORTED_ARRAY":
            ignored.append(f"{dpath}.multiValueHandling: applies to string dimensions only")
        return None
    handling = str(handling).upper()
    if handling not in MULTI_VALUE_HANDLING:
        raise SpecError(
            f"{dpath}.multiValueHandling",
            f"unknown {d['multiValueHandling']!r}; accepted: {', '.join(MULTI_VALUE_HANDLING)}",
        )
    return handling


def _dimension(d, dpath: str, ignored: list[str]) -> Dimension:
    if isinstance(d, str):
        return Dimension(d, "string")
    d = object_at(d, dpath)
    allow(
        d,
        dpath,
        {"type", "name", "createBitmapIndex", "multiValueHandling", "castToType", "formatVersion"},
    )
    dtype = _dimension_type(d, dpath)
    name = string_at(d, "name", dpath)
    if d.get("createBitmapIndex") is not None:
        ignored.append(
            f"{dpath}.createBitmapIndex: segments are Parquet files, which have no bitmap indexes"
        )
    handling = _multi_value_handling(d, dpath, dtype, ignored)
    if d.get("formatVersion") is not None:
        if dtype != "json":
            raise SpecError(f"{dpath}.formatVersion", "applies to json dimensions only")
        ignored.append(f"{dpath}.formatVersion: json columns are stored as JSON text here")
    cast = d.get("castToType")
    if cast is not None and dtype != "auto":
        raise SpecError(f"{dpath}.castToType", "applies to auto dimensions only")
    if dtype in ("auto", "json"):
        # Nested columns: stored as JSON text (numbers, strings, arrays and
        # objects keep their JSON form), queryable with JSON functions.
        scalars = "" if dtype == "json" or cast else " (scalar numbers and booleans are typed)"
        ignored.append(
            f"{dpath}.type: {dtype} (nested) columns are stored as JSON text{scalars}, "
            "not as Druid's typed nested columns"
            + (f"; castToType {cast} is kept as JSON text too" if cast else "")
        )
        return Dimension(name, "auto" if dtype == "auto" and not cast else "json")
    return Dimension(name, dtype, handling or "SORTED_ARRAY")


def dimensions_spec(schema: dict, ignored: list[str]) -> DimensionsSpec:
    """dataSchema.dimensionsSpec (absent: every input field is a string dimension)."""
    path = DIMENSIONS_PATH
    ds = object_at(schema.get("dimensionsSpec"), path, required=False)
    allow(ds, path, DIMENSIONS_SPEC_FIELDS)
    if ds.get("spatialDimensions"):
        raise SpecError(f"{path}.spatialDimensions", _SPATIAL)
    if not bool_at(ds, "forceSegmentSortByTime", path, True):
        raise SpecError(
            f"{path}.forceSegmentSortByTime",
            "segments are always sorted by __time here; leave it true",
        )
    raw_dims = none_as(ds.get("dimensions"), [])
    if not isinstance(raw_dims, list):
        raise SpecError(f"{path}.dimensions", "must be a list")
    dims = tuple(_dimension(d, f"{path}.dimensions[{i}]", ignored) for i, d in enumerate(raw_dims))
    dup = first_duplicate(d.name for d in dims)
    if dup is not None:
        raise SpecError(f"{path}.dimensions", f"dimension {dup!r} is listed twice")
    excl = none_as(ds.get("dimensionExclusions"), [])
    if not isinstance(excl, list) or not all(isinstance(e, str) for e in excl):
        raise SpecError(f"{path}.dimensionExclusions", "must be a list of names")
    both = [d.name for d in dims if d.name in set(excl)]
    if both:  # Druid's DimensionsSpec.verify
        raise SpecError(
            f"{path}.dimensionExclusions",
            f"dimensions and dimensions exclusions cannot overlap (as in Druid): {both[0]!r} is in both",
        )
    include_all = bool_at(ds, "includeAllDimensions", path, False)
    discovery = bool_at(ds, "useSchemaDiscovery", path, False)
    if include_all and not dims:
        ignored.append(
            f"{path}.includeAllDimensions: with no dimensions listed every input field is a dimension anyway"
        )
    return DimensionsSpec(dims, tuple(excl), include_all and bool(dims), discovery)
