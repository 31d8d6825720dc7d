"""API tokens over the API: one from a username and password (throttled), and a person's own
tokens listed (never their keys), created (the key shown once) and revoked."""

from collections.abc import Mapping

from django.conf import settings
from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, Throttled, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle

from accounts.models import ApiToken
from accounts.services import api_token_create, api_tokens_revoke, token_days_refusal, token_project_allowed
from accounts.signin_throttle import client_ip, refusal_message, signin_failed, signin_wait_seconds
from apikit.errors import Conflict
from apikit.schema import ERROR, errors
from apikit.strict import KnownFieldsOnly
from apikit.views import ApiView
from projects.models import Project


class TokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "project", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
        read_only_fields = fields

    project = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True,
                                           help_text="The one project it sees; null: every project its person sees.")


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The key: shown this once, never again.")

    class Meta(TokenSerializer.Meta):
        fields = ["token", *TokenSerializer.Meta.fields]
        read_only_fields = fields


class TokenRequestSerializer(KnownFieldsOnly, serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    days = serializers.IntegerField(
        required=False, min_value=1, max_value=3650, help_text="Lifetime in days; at most API_TOKEN_DAYS (the default)."
    )

    def validate_days(self, days):
        if refusal := token_days_refusal(days):
            raise ValidationError(refusal)
        return days


class ProjectTokenRequestSerializer(TokenRequestSerializer):
    project = serializers.SlugRelatedField(
        slug_field="slug", queryset=Project.objects.all(), required=False, allow_null=True,
        help_text="Limit the token to this project (its slug), where it has your role; omitted: every project you see.",
    )

    def validate_project(self, project):
        if not token_project_allowed(self.context["request"].user, project):
            raise ValidationError(f"No project {project.slug!r}.")
        return project


class PasswordTokenRequestSerializer(TokenRequestSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, style={"input_type": "password"}, trim_whitespace=False)


def _own_tokens(request):
    """The caller's tokens; through a token limited to a project, those limited to it only: the
    person's tokens for other projects, or for every project, are not its to see or revoke."""
    tokens = request.user.api_tokens.all()
    if isinstance(request.auth, ApiToken) and request.auth.project_id is not None:
        tokens = tokens.filter(project_id=request.auth.project_id)
    return tokens


def _new_token_answer(token: ApiToken, key: str) -> dict:
    return {"token": key, **TokenSerializer(token).data}


TOO_MANY = OpenApiResponse(
    ERROR, description="Too many failed sign-ins for this username or address; `Retry-After` says when to try again."
)


class SignInThrottle(BaseThrottle):
    """Refuses a password sign-in while its username or address is over the failure limit."""

    def allow_request(self, request, view) -> bool:
        data = request.data if isinstance(request.data, Mapping) else {}
        username = data.get("username") if isinstance(data.get("username"), str) else ""
        self.wait_seconds = signin_wait_seconds(username=username, ip=client_ip(request))
        return self.wait_seconds == 0

    def wait(self):
        return self.wait_seconds


class TokenView(ApiView):
    """POST a username and password: a new token, its key shown once. Refused (403) when password
    sign-in is switched off (LOCAL_SIGNIN=off)."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = [SignInThrottle]

    def throttled(self, request, wait):
        raise Throttled(wait, detail=refusal_message(wait))

    @extend_schema(
        operation_id="token_create",
        summary="A new API token from your username and password",
        request=PasswordTokenRequestSerializer,
        responses={200: NewTokenSerializer, **errors(400), 429: TOO_MANY},
    )
    def post(self, request):
        if not settings.LOCAL_SIGNIN:
            raise PermissionDenied(
                "Password sign-in is switched off here (LOCAL_SIGNIN=off): create a token "
                "from a signed-in session (POST /api/v1/tokens/)."
            )
        given = PasswordTokenRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        user = authenticate(
            request, username=given.validated_data["username"], password=given.validated_data["password"]
        )
        if user is None:
            signin_failed(username=given.validated_data["username"], ip=client_ip(request))
            raise ValidationError("Unable to log in with provided credentials.")
        token, key = api_token_create(
            user=user, name=given.validated_data["name"] or "from password", days=given.validated_data.get("days")
        )
        return Response(_new_token_answer(token, key))


class TokenListView(ApiView):
    required_perms = {"GET": (), "POST": ()}  # anyone signed in manages their own tokens

    @extend_schema(
        operation_id="tokens_list",
        summary="Your API tokens (never their keys); through a token limited to a project, those limited to it",
        responses={200: TokenSerializer(many=True), **errors()},
    )
    def get(self, request):
        return Response(TokenSerializer(_own_tokens(request), many=True).data)

    @extend_schema(
        operation_id="tokens_create",
        summary="A new API token, its key shown once (from a session)",
        request=ProjectTokenRequestSerializer,
        responses={201: NewTokenSerializer, **errors(400)},
    )
    def post(self, request):
        if isinstance(request.auth, ApiToken):
            # Else a leaked token could mint its own successor and outlive its revocation.
            raise PermissionDenied("Create tokens from a signed-in session or with your password, not with a token.")
        given = ProjectTokenRequestSerializer(data=request.data, context={"request": request})
        given.is_valid(raise_exception=True)
        token, key = api_token_create(
            user=request.user, name=given.validated_data["name"], days=given.validated_data.get("days"),
            project=given.validated_data.get("project"),
        )
        return Response(_new_token_answer(token, key), status=status.HTTP_201_CREATED)


class TokenRevokeView(ApiView):
    required_perms = {"POST": ()}
    takes_no_body = True

    @extend_schema(
        operation_id="tokens_revoke",
        summary="Revoke one of your API tokens",
        request=None,
        responses={200: TokenSerializer, **errors(404, 409)},
    )
    def post(self, request, pk: int):
        token = _own_tokens(request).filter(pk=pk).first()
        if token is None:
            raise NotFound("No such token of yours.")
        if not api_tokens_revoke(tokens=ApiToken.objects.filter(pk=token.pk)):
            raise Conflict("This token was already revoked.")
        token.refresh_from_db()
        return Response(TokenSerializer(token).data)
