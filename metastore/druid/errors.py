"""The one error of the Druid spec dialect: a field (dotted path) and what is wrong."""

from __future__ import annotations


class SpecError(ValueError):
    """A spec is invalid; `field` is the dotted path of the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
