"""What the published OpenAPI schema says that drf-spectacular cannot infer: the
error bodies, paginated lists, the task spec (metastore.spec_schema) and the
Druid-compatible endpoints' shapes. Used by the views' `extend_schema` and by
`postprocess`, a drf-spectacular postprocessing hook."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

from metastore import spec_schema

# --- errors ------------------------------------------------------------------------------


class ErrorOutput(serializers.Serializer):
    """Every error of the REST API."""

    error = serializers.CharField(help_text="What went wrong, in words, naming the field.")
    field = serializers.CharField(
        allow_null=True,
        help_text="The refused field (a dotted path into the body, or a parameter); "
        "null when no one field is at fault.",
    )
    message = serializers.CharField(help_text="What went wrong, without the field name.")
    detail = serializers.JSONField(
        required=False, help_text="DRF's own detail, where there is one (kept for old clients)."
    )


class DruidErrorOutput(serializers.Serializer):
    """Druid's error body (`{"error": ...}`), with the field where one is at fault."""

    error = serializers.CharField()
    field = serializers.CharField(required=False, allow_null=True)
    message = serializers.CharField(required=False)
    detail = serializers.JSONField(required=False)


class DruidSqlErrorOutput(serializers.Serializer):
    """Druid's SQL error body."""

    error = serializers.CharField()
    errorCode = serializers.CharField()  # noqa: N815 - Druid's name
    persona = serializers.CharField()
    category = serializers.CharField()
    errorMessage = serializers.CharField()  # noqa: N815 - Druid's name
    context = serializers.DictField()
    field = serializers.CharField(
        required=False, allow_null=True, help_text="Strata's addition: the refused field."
    )


ERROR_TEXT = {
    400: "Bad request: a malformed parameter or body, naming the field",
    401: "Not authenticated (a wrong token or Basic password)",
    403: "Not authenticated (no credentials), or the user's role does not allow it",
    404: "No such object",
    405: "Method not allowed",
    409: "Conflict with the object's state",
    413: "Request body too large (STRATA_MAX_BODY_BYTES)",
    415: "Unsupported media type: send application/json",
    429: "Too many requests (or every query slot busy: STRATA_QUERY_CONCURRENCY)",
    504: "The query ran past its time limit and was stopped",
}
# What any authenticated endpoint can answer, whatever it does.
# No 401: session auth comes first, so DRF answers 403 to missing or wrong credentials.
# 400 everywhere: control characters in any path or query parameter are refused
# before a view runs (console.security.RejectHostileRequestMiddleware).
COMMON = (400, 403, 405, 429)


def errors(*codes: int, druid: bool = False) -> dict[int, OpenApiResponse]:
    body = DruidErrorOutput if druid else ErrorOutput
    return {code: OpenApiResponse(body, description=ERROR_TEXT[code]) for code in codes}


def responses(ok: dict, *codes: int, druid: bool = False) -> dict:
    """Success responses plus the error responses of `codes` (and the common ones)."""
    wanted = sorted({*COMMON, *codes})
    return {**ok, **errors(*wanted, druid=druid)}


# A free text query parameter: anything but control characters, which are refused
# before any view runs (400).
TEXT = {"type": "string", "pattern": "^[^\\u0000-\\u001f\\u007f]*$"}

# A free string in a JSON body: anything but NUL, which the JSON parser refuses
# (console.security.parse_json_text: PostgreSQL cannot store it).
JSON_TEXT = {"type": "string", "pattern": "^[^\\u0000]*$"}

# --- pagination --------------------------------------------------------------------------

_PAGES: dict[str, type] = {}


def paginated(serializer_class: type) -> type:
    """`{"next", "previous", "results": [serializer]}` as a named component."""
    name = f"Paginated{serializer_class.__name__.removesuffix('Output')}List"
    if name not in _PAGES:
        _PAGES[name] = inline_serializer(
            name=name,
            fields={
                "next": serializers.URLField(
                    allow_null=True, help_text="The next page, or null on the last page."
                ),
                "previous": serializers.URLField(allow_null=True),
                "results": serializer_class(many=True),
            },
        )
    return _PAGES[name]


# --- the task spec -----------------------------------------------------------------------


def task_spec_request() -> dict:
    return {"application/json": spec_schema.task_spec_ref()}


def json_object(description: str = "") -> dict:
    out: dict = {"type": "object", "additionalProperties": True}
    if description:
        out["description"] = description
    return out


# --- the hook ------------------------------------------------------------------------------


def postprocess(result, generator, request, public):
    """Paths as SPEC §7 writes them (no trailing slash; both are served), request
    bodies required, the task spec components, and security schemes as the server
    checks them."""
    paths = {}
    for path, item in result.get("paths", {}).items():
        paths[path.rstrip("/") or "/"] = item
    result["paths"] = paths
    for item in paths.values():
        for operation in item.values():
            if "requestBody" in operation:
                # No view takes its POST without a body: each answers 400 to none.
                operation["requestBody"]["required"] = True
            ok = operation.get("responses", {}).get("200", {})
            for media in ok.get("content", {}).values():
                schema = media.get("schema", {})
                ref = schema.get("items", {}).get("$ref", "")
                if schema.get("type") == "array" and ref.split("/")[-1].startswith("Paginated"):
                    media["schema"] = {"$ref": ref}  # a page, not a list of pages
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(spec_schema.task_spec_components())
    return result
