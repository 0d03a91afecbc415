"""flattenSpec: root, path (JSONPath), jq and tree fields of an input format."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, bool_at, first_duplicate, none_as, object_at, string_at


@dataclass(frozen=True)
class FlattenField:
    """flattenSpec field: kind "root" (a top-level field), "path" (JSONPath) or "jq"
    (a jq expression beyond keys and indexes; jq paths and tree fields are paths)."""

    name: str
    kind: str
    expr: str


_JSONPATH = re.compile(
    r"^\$(?:\.[A-Za-z_$][\w$-]*|\[\d+\]|\['[^']*'\]|\[\"[^\"]*\"\])*"
    r"(?:\.(?:length|min|max|sum|avg)\(\))?$"
)
_JQ_STEP = re.compile(
    r'\.?\[(\d+)\]\??|\.?\["((?:[^"\\]|\\.)*)"\]\??'
    r'|\.([A-Za-z_][A-Za-z0-9_]*)\??|\."((?:[^"\\]|\\.)*)"\??'
)
_PLAIN_KEY = re.compile(r"^[A-Za-z_$][\w$-]*$")


def flatten_spec(
    fmt_obj: dict, fmt_path: str, *, jq: bool = True
) -> tuple[tuple[FlattenField, ...], bool]:
    """(fields, useFieldDiscovery) of an input format's flattenSpec; jq and tree
    fields only where `jq` (json input, as in Druid)."""
    path = f"{fmt_path}.flattenSpec"
    spec = object_at(fmt_obj.get("flattenSpec"), path, required=False)
    if not spec:
        return (), True
    allow(spec, path, {"useFieldDiscovery", "fields"})
    discovery = bool_at(spec, "useFieldDiscovery", path, True)
    fields = none_as(spec.get("fields"), [])
    if not isinstance(fields, list):
        raise SpecError(f"{path}.fields", "must be a list")
    out = [_field(f, f"{path}.fields[{i}]", jq=jq) for i, f in enumerate(fields)]
    dup = first_duplicate(f.name for f in out)
    if dup is not None:
        raise SpecError(f"{path}.fields", f"field {dup!r} is defined twice")
    return tuple(out), discovery


def _field(f, fpath: str, *, jq: bool) -> FlattenField:
    f = object_at(f, fpath)
    allow(f, fpath, {"type", "name", "expr", "nodes"})
    kind = f.get("type", "path")
    name = string_at(f, "name", fpath)
    if kind == "root":
        return FlattenField(name, "root", name)
    if kind in ("jq", "tree") and not jq:
        raise SpecError(
            f"{fpath}.type",
            f"{kind} flatten fields are only available with json input (as in Druid); "
            "use a path field with a JSONPath such as $.a.b[0]",
        )
    if kind in ("jq", "tree"):
        path_expr = _jq_or_tree_path(f, kind, fpath)
        # A jq path reads natively (a path field); the rest of jq runs in the jq library.
        return (
            FlattenField(name, "path", path_expr)
            if path_expr
            else FlattenField(name, "jq", f["expr"])
        )
    if kind != "path":
        raise SpecError(
            f"{fpath}.type",
            f"unknown flatten field type {kind!r}; accepted: root, path, jq, tree",
        )
    expr = string_at(f, "expr", fpath)
    program = None if _JSONPATH.match(expr) or not jq else _json_path_as_jq(expr)
    if program is not None:  # wildcards and deep scans: a list, run by the jq library
        return FlattenField(name, "jq", program)
    if not _JSONPATH.match(expr):
        raise SpecError(
            f"{fpath}.expr",
            f"JSONPath {expr!r} is not supported: use $ followed by .field, [index], "
            "['field'] steps, optionally ending in .length(), .min(), .max(), .sum() or .avg()"
            + (
                ", or with [*], .* and ..field steps (json input); filters ([?()]) and "
                "slices are not supported"
                if jq
                else ""
            ),
        )
    return FlattenField(name, "path", expr)


_WILD_STEP = re.compile(
    r"(\.\.)?(?:\.?\[\*\]|\.\*)|\.\.([A-Za-z_$][\w$-]*)|\.([A-Za-z_$][\w$-]*)"
    r"|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]"
)


def _json_path_as_jq(expr: str) -> str | None:
    """A JSONPath with wildcards (`[*]`, `.*`) or deep scans (`..name`), which Druid's
    JsonPath reads as the list of every match, as a jq program giving each match
    (several outputs are a list, a multi-value dimension). Keys missing below a
    wildcard are skipped, as JsonPath skips them. None for any other path."""
    steps, pos, indefinite = [], 1, False
    if not expr.startswith("$"):
        return None
    while pos < len(expr):
        m = _WILD_STEP.match(expr, pos)
        if m is None:
            return None
        deep_all, deep_key, key, index, quoted, dquoted = m.groups()
        key = next((k for k in (key, quoted, dquoted) if k is not None), None)
        if deep_key is not None:
            steps.append(
                f"(.. | objects | select(has({json.dumps(deep_key)})) | .[{json.dumps(deep_key)}])"
            )
            indefinite = True
        elif index is not None:
            steps.append(f'(if type == "array" then .[{index}] else empty end)')
        elif key is not None:
            k = json.dumps(key)
            steps.append(
                f'(if type == "object" and has({k}) then .[{k}] else empty end)'
                if indefinite
                else f".[{k}]?"
            )
        else:
            steps.append("(.. | scalars, arrays, objects)" if deep_all else "(.[]?)")
            indefinite = True
        pos = m.end()
    return " | ".join(steps) if indefinite else None


def _jq_or_tree_path(f: dict, kind: str, fpath: str) -> str | None:
    """The JSONPath a jq field (Druid's jq subset: `.a.b`, `.a[0]`, `.["key"]`) or a
    tree field (`nodes`: keys from the root) reads: both walk keys and indexes,
    which Spark evaluates natively, as path fields. None for a jq expression
    beyond keys and indexes (checked by the jq library)."""
    if kind == "tree":
        nodes = f.get("nodes")
        if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) for n in nodes):
            raise SpecError(f"{fpath}.nodes", "must be a non-empty list of field names")
        return "$" + "".join(_json_path_key(n) for n in nodes)
    expr = string_at(f, "expr", fpath)
    import jq

    try:
        jq.compile(expr)
    except ValueError as exc:
        raise SpecError(
            f"{fpath}.expr", f"is not a jq expression: {str(exc).splitlines()[0]}"
        ) from exc
    return _jq_as_json_path(expr.strip())


def _jq_as_json_path(text: str) -> str | None:
    """`.a.b[0]`-style jq as JSONPath; None when it is more than keys and indexes."""
    steps, pos = [], 0
    while pos < len(text):
        m = _JQ_STEP.match(text, pos)
        if m is None:
            return None
        index, quoted, plain, dotted = m.groups()
        if index is not None:
            steps.append(f"[{index}]")
        else:
            key = (
                plain
                if plain is not None
                else json.loads(f'"{quoted if quoted is not None else dotted}"')
            )
            steps.append(_json_path_key(key))
        pos = m.end()
    return "$" + "".join(steps) if steps else None


def _json_path_key(key: str) -> str:
    if _PLAIN_KEY.match(key):
        return f".{key}"
    return f"['{key}']" if "'" not in key else f'["{key}"]'
