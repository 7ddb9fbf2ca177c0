"""File downloads from the REST API: upstream YAML streams (``kubectl apply -f`` takes them)."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse

#: A YAML download in the schema: a stream of manifests, one YAML document each, described as
#: the list of its documents (so clients and conformance checks know what to expect).
YAML_RESPONSE = {(200, "application/yaml"): OpenApiResponse(
    {"type": "array", "items": {"type": "object", "additionalProperties": True}},
    description="A YAML stream: one document per object (upstream manifests).")}


def yaml_download(text: str, filename: str) -> HttpResponse:
    """``text`` (YAML documents) as an attachment named ``filename``."""
    response = HttpResponse(text, content_type="application/yaml")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
