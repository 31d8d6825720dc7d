"""OpenAPI helpers: query parameters described from the dashboard's filter forms, error bodies."""
from django import forms
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, inline_serializer
from rest_framework import serializers

ERROR = inline_serializer(
    "Error",
    {
        "detail": serializers.CharField(help_text="What went wrong, in a sentence."),
        "errors": serializers.JSONField(required=False, help_text="Field names with their messages (400 only)."),
    },
)
ERROR_TEXT = {
    400: "Invalid input: `detail` says what, `errors` names the fields.",
    401: "No valid credentials: log in, or send `Authorization: Token <key>`.",
    403: "Your role does not allow this (or a session request without its CSRF token).",
    404: "No such object.",
    409: "The object's state does not allow this.",
    413: "The request body is larger than the server reads: `detail` says the limit.",
}


def errors(*codes: int) -> dict:
    """Response entries for extend_schema(responses=...): always 401 and 403, plus `codes`."""
    return {code: OpenApiResponse(ERROR, description=ERROR_TEXT[code]) for code in sorted({401, 403, *codes})}


def form_parameters(form_class: type[forms.Form]) -> list[OpenApiParameter]:
    """The form's fields as query parameters, so the schema cannot drift from what is checked."""
    parameters = []
    for name, field in form_class.base_fields.items():
        enum = None
        if isinstance(field, forms.ModelChoiceField):
            kind = OpenApiTypes.INT
        elif isinstance(field, forms.ChoiceField):
            kind, enum = OpenApiTypes.STR, [value for value, _ in field.choices if value]
        elif isinstance(field, forms.DateField):
            kind = OpenApiTypes.DATE
        else:
            kind = OpenApiTypes.STR
        description = str(field.help_text or field.label or name.replace("_", " ").capitalize())
        parameters.append(OpenApiParameter(name, kind, OpenApiParameter.QUERY, description=description, enum=enum))
    return parameters
