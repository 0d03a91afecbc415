"""Whether a capturing group of a regular expression can miss a match that
succeeds: Java's `Matcher.group(n)` is then null (Druid's regexp_extract), where
Spark and DuckDB give ''. Read from the pattern's structure (Python's own regex
parser, whose syntax Java's shares for groups, quantifiers and alternation), so
that the engines check each row only for groups that can be absent. Pure."""

from __future__ import annotations

import re

try:  # the parser behind `re` (Python 3.11+ names it _parser)
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - older Pythons
    import sre_parse as _sre_parse

_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def group_count(pattern: str) -> int | None:
    """The number of capturing groups, or None if Python cannot read the pattern."""
    try:
        return re.compile(pattern).groups
    except (re.error, RecursionError):
        return None


def may_be_absent(pattern: str, group: int) -> bool:
    """Whether group `group` (> 0) can take no part in a successful match: it sits
    under an optional repeat, an alternation, a negative lookaround or a conditional.
    A pattern Python cannot read is assumed to allow it."""
    try:
        tree = _sre_parse.parse(pattern)
    except (re.error, RecursionError):
        return True
    found = _find(tree, group, optional=False)
    return True if found is None else found


def _find(items, group: int, *, optional: bool) -> bool | None:
    """Whether `group` is optional in `items` (None: not found there)."""
    for op, av in items:
        name = str(op)
        if name == "SUBPATTERN":
            if av[0] == group:
                return optional
            found = _find(av[3], group, optional=optional)
        elif name in _REPEATS:
            found = _find(av[2], group, optional=optional or av[0] == 0)
        elif name == "BRANCH":
            found = _first(av[1], group)
        elif name in ("ASSERT", "ASSERT_NOT"):
            found = _find(av[1], group, optional=optional or name == "ASSERT_NOT")
        elif name == "ATOMIC_GROUP":
            found = _find(av, group, optional=optional)
        elif name == "GROUPREF_EXISTS":
            found = _first([p for p in av[1:] if p is not None], group)
        else:
            continue
        if found is not None:
            return found
    return None


def _first(branches, group: int) -> bool | None:
    """Inside one of several alternatives, a group is optional wherever it is."""
    for branch in branches:
        if _find(branch, group, optional=True) is not None:
            return True
    return None
