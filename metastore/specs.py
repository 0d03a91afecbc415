"""Kept only for `../shared/druid_specs/check.py`, which imports SpecError from here.

The Druid task-spec dialect lives in the package `metastore.druid` (one module
per sub-grammar; `metastore.druid.tasks.validate_task_spec` is the entry point).
Import from there; this module re-exports nothing else.
"""

from metastore.druid.errors import SpecError

__all__ = ["SpecError"]
