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
