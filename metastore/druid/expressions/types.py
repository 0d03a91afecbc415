"""The vocabulary every emitter shares: Druid's types of values, the emitted,
typed argument (`Arg`) and the error.

Druid types are written `long`, `double`, `string`, `json` (JSON text),
`array<long>`, `array<double>`, `array<string>`, `array<json>`, `complex` (a
nested value read from the input) and `any`. Pure: no Spark or Django import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NUMERIC = ("long", "double")
ARRAYS = ("array<long>", "array<double>", "array<string>", "array<json>")
# The type names cast() and json_value() take, as Druid types.
TYPE_NAMES = {
    "LONG": "long",
    "DOUBLE": "double",
    "FLOAT": "double",
    "STRING": "string",
    "ARRAY<LONG>": "array<long>",
    "ARRAY<DOUBLE>": "array<double>",
    "ARRAY<STRING>": "array<string>",
}


class ExpressionError(ValueError):
    """The expression does not parse, or uses a function Strata cannot translate."""


class UnsupportedFunction(ExpressionError):
    """A function Druid has that this engine's emitter does not translate."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.function = name


@dataclass(frozen=True)
class Arg:
    """An emitted argument: its SQL, its Druid type, and its value when it is a literal."""

    sql: str
    kind: str
    literal: Any = None
    is_literal: bool = False

    def __str__(self) -> str:
        return self.sql


def literal(arg: Arg, what: str, name: str):
    """The value of an argument that must be a literal (a period, a pattern...)."""
    if not arg.is_literal:
        raise ExpressionError(f"{name}(): {what} must be a literal")
    return arg.literal


def int_literal(arg: Arg, what: str, name: str, low: int, high: int, who: str = "") -> int:
    """An argument that must be a whole-number literal from `low` to `high` (a
    radix, a precision); `who` names the function in the refusal if not `name`."""
    value = literal(arg, what, name)
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):  # null, text, NaN, infinity
        number = low - 1
    if not low <= number <= high:
        raise ExpressionError(f"{who or name}(): {what} must be from {low} to {high}")
    return number


def named_type(arg: Arg, name: str, refusal: str) -> str:
    """The Druid type a type-name argument (`'LONG'`, `'ARRAY<STRING>'`...) names;
    `refusal` says, over the name, what is not supported."""
    value = str(literal(arg, "the type", name)).upper().replace(" ", "")
    if value not in TYPE_NAMES:
        raise ExpressionError(f"{refusal.format(repr(value))}; accepted: {', '.join(TYPE_NAMES)}")
    return TYPE_NAMES[value]


def element_kind(kind: str) -> str:
    if kind.startswith("array<"):
        return kind[len("array<") : -1]
    return "string"


def scalar_kind(kind: str) -> str:
    return kind if kind in ("long", "double", "string") else "string"


def common_kind(args: list[Arg]) -> str:
    """The type several branches of a conditional share (a mix of numbers and
    text is text; nulls do not count)."""
    kinds = {a.kind for a in args if a.sql != "NULL"}
    if not kinds:
        return "string"
    if kinds <= set(NUMERIC):
        return "double" if "double" in kinds else "long"
    if len(kinds) == 1:
        return kinds.pop()
    if kinds <= set(ARRAYS):
        return "array<string>"
    return "string"
