"""JSON under Strata's rules (depth, size, duplicate keys, NaN, NUL), for every
door JSON comes in by: request bodies (`console.security.StrictJSONParser`), JSON
inside form fields (the console, the Django admin's `StrictJSONFormField`)."""

from __future__ import annotations

import json
import re
from itertools import accumulate

from django import forms
from django.conf import settings
from django.forms.fields import InvalidJSONInput
from rest_framework import exceptions


class JSONRefused(exceptions.ParseError):
    """A JSON body that is well-formed but refused (depth, duplicate keys, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How deeply a JSON text nests arrays and objects (without parsing it)."""
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    return max(accumulate(_DEPTH_STEP[c] for c in brackets), default=0)


def _refuse_constant(name: str):
    raise JSONRefused("(body)", f"{name} is not a JSON number")


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > 40:
        raise JSONRefused("(body)", f"number with {len(text)} digits is out of range")
    return int(text)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise JSONRefused(key, f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def parse_json_text(text: str | bytes, *, field: str = "(body)"):
    """Parse JSON under Strata's limits; raise `JSONRefused` naming `field`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONRefused(field, f"not UTF-8: {exc}") from None
    max_bytes = settings.STRATA_MAX_BODY_BYTES
    if len(text) > max_bytes:
        raise JSONRefused(field, f"longer than {max_bytes} bytes")
    depth = json_depth(text)
    if depth > settings.STRATA_MAX_JSON_DEPTH:
        raise JSONRefused(
            field, f"nested {depth} levels deep; at most {settings.STRATA_MAX_JSON_DEPTH}"
        )
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_refuse_constant,
            parse_int=_parse_int,
        )
    except JSONRefused as exc:
        if field != "(body)" and exc.field == "(body)":
            exc.field = field
        raise
    except (ValueError, RecursionError) as exc:
        raise JSONRefused(field, f"not valid JSON: {exc}") from None
    nul_at = find_nul(value)
    if nul_at:
        raise JSONRefused(nul_at, "contains a NUL character or a lone surrogate")
    return value


UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def find_nul(value, path: str = "(body)") -> str | None:
    """The path of the first string (or key) in parsed JSON that holds a NUL
    character or a lone surrogate: PostgreSQL cannot store them in text or jsonb."""
    if isinstance(value, str):
        return path if UNSTORABLE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            sub = key if path == "(body)" else f"{path}.{key}"
            if UNSTORABLE.search(key):
                return sub
            found = find_nul(item, sub)
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = find_nul(item, f"{path}[{i}]")
            if found:
                return found
    return None


class StrictJSONFormField(forms.JSONField):
    """A form's JSON field under the API's rules (depth, duplicate keys, NaN, NUL),
    for the Django admin: refused input is a form error, never a 500."""

    def to_python(self, value):
        if isinstance(value, str) and not self.disabled and value not in self.empty_values:
            try:
                parse_json_text(value, field=self.label or "value")
            except JSONRefused as exc:
                raise forms.ValidationError(str(exc.detail), code="invalid") from None
        return super().to_python(value)

    def bound_data(self, data, initial):
        if isinstance(data, str) and not self.disabled:
            try:
                parse_json_text(data)
            except JSONRefused:
                return InvalidJSONInput(data)
        return super().bound_data(data, initial)
