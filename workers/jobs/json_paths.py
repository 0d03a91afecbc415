"""JSONPath flatten fields that walk into the same top-level field: parse it once.

`get_json_object` parses the field's JSON text again for every path, so 500 path
fields into one object parse each row 500 times. When the paths into a field fit
one schema (every step below a key is either an object or an array, never both,
and no path stops where another goes on), the field is parsed once with
`from_json` into that schema, whose leaves are strings (Spark keeps a nested
object's or a number's JSON text, as `get_json_object` does), and each path reads
its leaf out of the parsed struct. Paths that do not fit keep `get_json_object`.
"""

from __future__ import annotations

from collections.abc import Sequence

Step = str | int


class _Conflict(Exception):
    """The paths do not fit one schema."""


def _tree(paths: Sequence[Sequence[Step]]) -> dict:
    """The paths as a tree: {step: subtree}, a leaf is None."""
    root: dict = {}
    for steps in paths:
        node = root
        for i, step in enumerate(steps):
            last = i == len(steps) - 1
            if step in node and (node[step] is None) != last:
                raise _Conflict  # one path stops where another goes on
            if last:
                node[step] = None
            else:
                node = node.setdefault(step, {})
    return root


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _schema(node: dict | None) -> str:
    """Spark DDL type of a subtree: objects are structs, arrays arrays, leaves text."""
    if node is None:
        return "string"
    keys = list(node)
    if all(isinstance(k, int) for k in keys):
        element = {_schema(child) for child in node.values()}
        if len(element) != 1:
            raise _Conflict  # array elements read with different shapes
        return f"array<{element.pop()}>"
    if any(isinstance(k, int) for k in keys):
        raise _Conflict  # read both as an object and as an array
    if len({k.lower() for k in keys}) != len(keys):
        raise _Conflict  # names differing only in case are ambiguous in Spark SQL
    fields = ", ".join(f"{_quoted(k)}: {_schema(child)}" for k, child in node.items())
    return f"struct<{fields}>"


def shared_schema(paths: Sequence[Sequence[Step]]) -> str | None:
    """The DDL schema that parses one field for all `paths` (the steps below the
    field), or None when they do not fit one schema."""
    try:
        return _schema(_tree(paths))
    except _Conflict:
        return None


def accessor(parsed: str, steps: Sequence[Step]) -> str:
    """SQL reading the leaf at `steps` out of the parsed column `parsed`; an index
    past the array's end is NULL, as in JSONPath."""
    sql = parsed
    for step in steps:
        sql = f"get({sql}, {step})" if isinstance(step, int) else f"{sql}.{_quoted(step)}"
    return sql
