"""Schemathesis hooks (``SCHEMATHESIS_HOOKS``): how to read Meridian's YAML downloads.

They are YAML streams (one document per manifest, as ``kubectl apply -f`` takes them); the
schema describes the stream as the list of its documents, and this reads it that way
(schemathesis' own YAML reader takes one document only).
"""

from __future__ import annotations

import schemathesis
import yaml
from schemathesis.core.media_types import YAML_MEDIA_TYPES


# Every YAML media type: schemathesis picks the first registered deserializer of the YAML
# family, so registering only application/yaml would leave its own one-document reader first.
@schemathesis.deserializer(*YAML_MEDIA_TYPES)
def yaml_stream(ctx, response) -> list:
    return [document for document in yaml.safe_load_all(response.content) if document is not None]
