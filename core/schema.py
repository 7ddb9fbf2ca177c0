"""OpenAPI descriptions of Meridian's own authentication classes."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class APITokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "core.authentication.APITokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>`; get a key from POST /api/v1/auth/token/.",
        }
