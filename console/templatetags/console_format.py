"""How the console writes times: ISO-8601 in UTC, always with its `Z`, the same
form as intervals and versions, whatever the server's or the browser's zone."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html

register = template.Library()


def iso_utc(value: datetime | None) -> str:
    """`2024-01-01T05:06:07Z` (milliseconds only when there are any)."""
    if not isinstance(value, datetime):
        return ""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return text + "Z"


@register.filter
def utc(value):
    """A <time> element showing the moment in ISO-8601 UTC; "—" for none."""
    text = iso_utc(value)
    if not text:
        return "—"
    return format_html('<time datetime="{}" title="UTC">{}</time>', text, text)


@register.filter
def grouped(value) -> str:
    """An integer with thousands separated by commas (342,895)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def signed(value) -> str:
    """A change with its sign: +1,024, −7, ±0."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        return str(value)
    if n == 0:
        return "±0"
    return f"+{n:,}" if n > 0 else f"−{-n:,}"


@register.filter
def utc_text(value) -> str:
    """The moment in ISO-8601 UTC as plain text (for attributes)."""
    return iso_utc(value)


def elapsed(seconds: float) -> str:
    """A duration as an operator reads it: 4 s, 11 min 3 s, 2 h 5 min, 3 d 4 h."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


@register.filter
def since(value) -> str:
    """How long ago `value` was, to the second ("4 s")."""
    from django.utils import timezone

    if not isinstance(value, datetime):
        return ""
    return elapsed((timezone.now() - value).total_seconds())
