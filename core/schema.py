"""OpenAPI descriptions of Meridian's own authentication classes."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class StaticAuthenticationScheme(OpenApiAuthenticationExtension):
    """An authentication class whose OpenAPI security scheme is the same for every view."""

    definition: dict[str, str] = {}

    def get_security_definition(self, auto_schema):
        return dict(self.definition)  # each document its own: postprocessing hooks may change it


class APITokenAuthenticationScheme(StaticAuthenticationScheme):
    target_class = "core.authentication.APITokenAuthentication"
    name = "tokenAuth"
    definition = {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`Token <key>`; get a key from POST /api/v1/auth/token/.",
    }


class ProviderTokenAuthenticationScheme(StaticAuthenticationScheme):
    target_class = "core.authentication.ProviderTokenAuthentication"
    name = "providerToken"
    definition = {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "An access token from Meridian's OpenID Connect provider (single sign-on), for an audience "
                       "in MERIDIAN_OIDC_AUDIENCE.",
    }


ERROR_SCHEMA = {
    "type": "object",
    "description": "The one error body of every 4xx/5xx answer (core.errors).",
    "properties": {
        "code": {"type": "string", "description": "Machine code, e.g. invalid, stale, not_found, selector_overlap."},
        "detail": {"type": "string", "description": "What went wrong, for people."},
        "errors": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                   "description": "Field path or query parameter → messages."},
    },
    "required": ["code", "detail", "errors"],
}
ERROR_STATUSES = {
    "400": "Refused: the input is invalid or a rule forbids the change; nothing was written.",
    "401": "Not authenticated.",
    "403": "Not allowed.",
    "404": "Not found.",
    "405": "Method not allowed.",
    "406": "Not acceptable.",
    "409": "Conflicts with the current state (a concurrent change got there first).",
    "412": "If-Match names a version that is no longer current; nothing was written.",
    "415": "Unsupported media type.",
    "429": "Too many requests (login lockout).",
    "503": "A dependency (the database) is unavailable; retry.",
}


def add_error_responses(result, generator, request, public):
    """drf-spectacular postprocessing hook: every operation documents the one error body for
    every status the base classes can answer, so clients (and schema tests) can rely on it."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR_SCHEMA
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            responses = operation.setdefault("responses", {})
            for status, description in ERROR_STATUSES.items():
                responses.setdefault(status, {"description": description,
                                              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    return result


DRY_RUN_PARAMETER = {
    "name": "dry_run", "in": "query", "required": False, "schema": {"type": "string", "enum": ["true", "false"]},
    "description": "true: validate and run the write in a transaction that is rolled back (Kubernetes' dryRun=All); "
                   "the answer is what would be stored, or the refusal; nothing is kept. An endpoint whose effect "
                   "leaves the database refuses it (400, dry_run_unsupported).",
}


def add_dry_run_parameter(result, generator, request, public):
    """drf-spectacular postprocessing hook: every write documents ``?dry_run``
    (``core.api.viewsets.DryRunMixin``, which every REST view taking a write mixes in)."""
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in ("post", "put", "patch", "delete"):
                continue
            parameters = operation.setdefault("parameters", [])
            if not any(p.get("name") == "dry_run" and p.get("in") == "query" for p in parameters):
                parameters.append(DRY_RUN_PARAMETER)
    return result
