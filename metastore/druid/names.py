"""Names a spec chooses: dataSource names and task ids (both name directories)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from metastore.druid.errors import SpecError

DATASOURCE_MAX_BYTES = 200  # UTF-8; it is a directory name and part of task ids
TASK_ID_MAX_LENGTH = 200
_TASK_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+\-]*\Z")


def datasource_name(value: Any, path: str) -> str:
    """Druid's rules (IdUtils.validateId): not empty, no '/', not starting with '.',
    no whitespace but the space; and here also no control characters and no
    backslash, at most DATASOURCE_MAX_BYTES bytes of UTF-8."""
    if not isinstance(value, str) or not value.strip():
        raise SpecError(path, "is required (a non-empty string)")
    shown = value if len(value) <= 60 else f"{value[:60]!r}... ({len(value)} chars)"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise SpecError(path, f"invalid dataSource name {shown}: not valid Unicode") from None
    if size > DATASOURCE_MAX_BYTES:
        raise SpecError(
            path, f"invalid dataSource name {shown}: {size} bytes, at most {DATASOURCE_MAX_BYTES}"
        )
    if value.startswith("."):
        raise SpecError(path, f"invalid dataSource name {shown}: cannot start with '.'")
    bad = next(
        (
            c
            for c in value
            if c in "/\\"
            or (c.isspace() and c != " ")
            or unicodedata.category(c) in ("Cc", "Cf", "Cs")
        ),
        None,
    )
    if bad is not None:
        raise SpecError(
            path,
            f"invalid dataSource name {shown}: {bad!r} is not allowed "
            "(no slashes, control characters or whitespace but the space)",
        )
    return value


def validate_task_id(value: Any, path: str = "id") -> str:
    """A task id the user chose: it names directories under intermediary and deep
    storage, so only letters, digits and `_ . : + -`, not starting with '.' or '-',
    at most TASK_ID_MAX_LENGTH characters."""
    if not isinstance(value, str) or not value:
        raise SpecError(path, "must be a non-empty string")
    if len(value) > TASK_ID_MAX_LENGTH:
        raise SpecError(path, f"{len(value)} characters; at most {TASK_ID_MAX_LENGTH}")
    if not _TASK_ID.match(value):
        raise SpecError(
            path,
            f"invalid task id {value[:60]!r}: use letters, digits and _ . : + - "
            "(starting with a letter, digit or _)",
        )
    return value
