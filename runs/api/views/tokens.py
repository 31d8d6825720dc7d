"""An API token from a username and password."""
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.permissions import AllowAny

from runs.api.errors import exception_handler
from runs.api.schema import errors


class TokenView(ObtainAuthToken):
    """POST username and password, get the user's API token (the same one on every call)."""

    permission_classes = [AllowAny]

    def get_exception_handler(self):
        return exception_handler

    @extend_schema(
        operation_id="token_create", summary="Get your API token from your username and password",
        responses={200: inline_serializer("Token", {"token": serializers.CharField()}), **errors(400)},
    )
    def post(self, request, *args, **kwargs):
        return super().post(request, *args, **kwargs)
