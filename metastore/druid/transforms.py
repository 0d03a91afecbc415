"""transformSpec: expression transforms (Druid's expression language, translated
by `metastore.druid.expressions`) and the row filter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metastore.druid.errors import SpecError
from metastore.druid.expressions import ExpressionError
from metastore.druid.expressions import translate as translate_expression
from metastore.druid.fields import allow, first_duplicate, object_at, string_at
from metastore.druid.filters import validate_filter

TRANSFORM_SPEC_FIELDS = {"filter", "transforms"}
TRANSFORM_PATH = "spec.dataSchema.transformSpec"


@dataclass(frozen=True)
class Transform:
    """An expression transform: `expression` is Druid's text, `columns` what it reads."""

    name: str
    expression: str
    columns: tuple[str, ...] = ()


def _transform(t, tpath: str) -> Transform:
    t = object_at(t, tpath)
    allow(t, tpath, {"type", "name", "expression"})
    if t.get("type", "expression") != "expression":
        raise SpecError(
            f"{tpath}.type", f"unknown transform type {t.get('type')!r}; accepted: expression"
        )
    # A transform named __time replaces each row's timestamp (epoch millis), once
    # timestampSpec has parsed it (ingestion-spec.md, timestampSpec).
    name = string_at(t, "name", tpath)
    expression = t.get("expression")
    try:
        translated = translate_expression(expression)
    except ExpressionError as exc:
        raise SpecError(f"{tpath}.expression", str(exc)) from None
    return Transform(name, expression, translated.columns)


def transforms_list(raw: Any, path: str) -> tuple[Transform, ...]:
    """transformSpec.transforms: each expression parsed and checked once here."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError(path, "must be a list of transforms")
    out = tuple(_transform(t, f"{path}[{i}]") for i, t in enumerate(raw))
    dup = first_duplicate(t.name for t in out)
    if dup is not None:
        raise SpecError(path, f"transform {dup!r} is defined twice")
    return out


def transform_spec(schema: dict) -> tuple[tuple[Transform, ...], dict | None]:
    """An ingestion spec's dataSchema.transformSpec: (transforms, filter or None)."""
    path = TRANSFORM_PATH
    transform = object_at(schema.get("transformSpec"), path, required=False)
    allow(transform, path, TRANSFORM_SPEC_FIELDS)
    transforms = transforms_list(transform.get("transforms"), f"{path}.transforms")
    flt = transform.get("filter")
    return transforms, None if flt is None else validate_filter(flt, f"{path}.filter")
