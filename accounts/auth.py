"""`Authorization: Token <key>` for the API, checked against the hashed tokens."""

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from accounts.services import TokenRefused, api_token_check
from audit.context import actor_set, request_address
from audit.tokens import token_used

KEYWORD = "Token"  # the header scripts already send (it was DRF's authtoken before)


class ApiTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD.lower().encode():
            return None  # not ours: another class (the session) may authenticate the request
        if len(parts) != 2:
            raise AuthenticationFailed("Invalid token header: send `Authorization: Token <key>`.")
        try:
            token = api_token_check(parts[1].decode("ascii"))
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid token.") from None
        except TokenRefused as exc:
            raise AuthenticationFailed(str(exc)) from None
        token.user.token_project_id = token.project_id  # projects/access.py cuts to it
        actor_set(user=token.user, via="api", request=request)
        token_used(token_id=token.pk, token_repr=str(token), user=token.user, address=request_address(request))
        return token.user, token

    def authenticate_header(self, request) -> str:
        return KEYWORD
