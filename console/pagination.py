"""Cursor pagination of the API's lists (tasks, locks, dataSources, segments, commits).

Every page is `{"next": url | null, "previous": url | null, "results": [...]}`;
follow `next` until it is null. A cursor is opaque; `limit` sets the page size
(default PAGE_SIZE, at most MAX_PAGE_SIZE). Cursors keep their place when rows
are added meanwhile (no offset that shifts)."""

from __future__ import annotations

import base64
import binascii
import json
from urllib.parse import urlencode

from django.core.exceptions import ValidationError
from rest_framework import pagination
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from console.security import parse_natural
from metastore.druid.errors import SpecError


class InvalidCursor(NotFound):
    """A cursor that names no page (as DRF answers it: 404), naming the parameter."""

    field = "cursor"
    default_detail = "invalid cursor; use the next link of a page"


PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def page_size(request) -> int:
    """`limit`, checked: 1..MAX_PAGE_SIZE (default PAGE_SIZE)."""
    text = request.query_params.get("limit")
    if text is None or text == "":
        return PAGE_SIZE
    size = parse_natural(text)
    if size is None or not 1 <= size <= MAX_PAGE_SIZE:
        raise SpecError("limit", f"must be an integer from 1 to {MAX_PAGE_SIZE}")
    return size


class _CheckedLimit:
    def get_page_size(self, request):
        return page_size(request)


class TaskCursorPagination(_CheckedLimit, pagination.CursorPagination):
    """Newest task first (ties by id)."""

    ordering = ("-created_at", "-id")
    page_size_query_param = "limit"
    max_page_size = MAX_PAGE_SIZE

    def paginate_queryset(self, queryset, request, view=None):
        self.position_field = queryset.model._meta.get_field(self.ordering[0].lstrip("-"))
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise InvalidCursor() from None
        if cursor is not None and cursor.position is not None:
            # A forged cursor's position that is no value of the ordering field
            # would fail in the query (a 500).
            try:
                self.position_field.to_python(cursor.position)
            except ValidationError:
                raise InvalidCursor() from None
        return cursor


class CommitCursorPagination(TaskCursorPagination):
    """Newest commit first."""

    ordering = ("-seq",)


class LockCursorPagination(TaskCursorPagination):
    """In the order the locks were granted, oldest first (ties by id)."""

    ordering = ("created_at", "id")


class ListCursorPagination:
    """Keyset pagination of an already ordered list: the cursor is the sort key of
    the last item of the previous page; the next page holds the items after it."""

    def __init__(self, key):
        self.key = key

    def _decode(self, text: str):
        try:
            raw = base64.urlsafe_b64decode(text.encode("ascii") + b"=" * (-len(text) % 4))
            value = json.loads(raw)
        except (ValueError, UnicodeError, binascii.Error):
            value = None
        if not isinstance(value, list):
            raise InvalidCursor()
        return value

    def paginate(self, items: list, request) -> list:
        limit = page_size(request)
        cursor = request.query_params.get("cursor")
        if cursor:
            after = self._decode(cursor)
            try:
                items = [item for item in items if self._key(item) > after]
            except TypeError:
                raise InvalidCursor() from None
        page = items[:limit]
        self.request = request
        self.next_key = self._key(page[-1]) if len(items) > limit else None
        return page

    def _key(self, item) -> list:
        return json.loads(json.dumps(list(self.key(item)), default=str))

    def get_paginated_response(self, data) -> Response:
        next_url = None
        if self.next_key is not None:
            token = base64.urlsafe_b64encode(json.dumps(self.next_key).encode()).decode()
            params = self.request.query_params.copy()
            params["cursor"] = token.rstrip("=")
            next_url = self.request.build_absolute_uri(
                f"{self.request.path}?{urlencode(params, doseq=True)}"
            )
        return Response({"next": next_url, "previous": None, "results": data})
