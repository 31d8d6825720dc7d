"""OpenID Connect sign-in through mozilla-django-oidc: its backend and views, fitted to this site.

The library does the protocol (state, nonce, PKCE, the code exchange, the ID token's signature
and expiry). On top of it: endpoints from discovery (accounts/sso_discovery.py), the signing key
chosen, the ID token's issuer, audience and authorized party and the callback's RFC 9207 `iss`
checked (accounts/sso_checks.py), the userinfo's subject required to be the ID token's, and the
person matched and given roles by accounts/sso_users.py. The backend leaves why it refused on the
request (request.sso_refusal); the callback view shows it on the sign-in page, as it does a
callback that belongs to no sign-in of this browser (a changed state, an answer opened again).
"""

import logging
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.views import LogoutView
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from accounts.sso_checks import NO_ISSUER, TokenRefused, check_id_token, response_issuer_refusal, signing_key
from accounts.sso_discovery import ProviderUnreachable, provider_setting
from accounts.sso_users import SignInRefused, sso_user_sign_in

log = logging.getLogger(__name__)

UNREACHABLE = "The identity provider could not be reached: try again in a moment."
FAILED = "Single sign-on did not complete: try again."
REFUSED = "Single sign-on was refused: {why}. Try again; if it happens again, tell an administrator."
STALE = (
    "This answer from the identity provider does not belong to a sign-in started in this browser, "
    "or was already used (opened twice, or changed on the way): sign in again."
)


class SsoBackend(OIDCAuthenticationBackend):
    get_settings = staticmethod(provider_setting)

    def __init__(self, *args, **kwargs):
        # Django makes a backend for every request of a signed-in person (get_user): the
        # endpoints, which may need the provider's discovery document, are read only at sign-in.
        self.UserModel = auth.get_user_model()

    def _read_endpoints(self) -> None:
        self.OIDC_OP_TOKEN_ENDPOINT = self.get_settings("OIDC_OP_TOKEN_ENDPOINT")
        self.OIDC_OP_USER_ENDPOINT = self.get_settings("OIDC_OP_USER_ENDPOINT")
        self.OIDC_OP_JWKS_ENDPOINT = self.get_settings("OIDC_OP_JWKS_ENDPOINT", None)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None

    def authenticate(self, request, **kwargs):
        # Only the callback view passes a nonce; a password sign-in (username, password) that
        # reaches this backend must not start a code exchange from its query string.
        if request is None or "nonce" not in kwargs or set(kwargs) - {"nonce", "code_verifier"}:
            return None
        try:
            self._read_endpoints()
            return super().authenticate(request, **kwargs)
        except ProviderUnreachable as exc:
            log.error("single sign-on: %s", exc)
            request.sso_refusal = UNREACHABLE
        except SignInRefused as exc:
            request.sso_refusal = str(exc)
        except TokenRefused as exc:
            (log.error if str(exc) == NO_ISSUER else log.warning)("single sign-on refused: %s", exc)
            request.sso_refusal = REFUSED.format(why=exc)
        except Exception as exc:  # the provider's error answers, a bad token: no detail for the page
            log.warning("single sign-on failed: %s: %s", type(exc).__name__, exc)
        return None

    # ModelBackend's, which refuses a deactivated account's sessions (the library's does not).
    get_user = ModelBackend.get_user

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)
        check_id_token(payload, client_id=self.OIDC_RP_CLIENT_ID, issuer=self.get_settings("OIDC_OP_ISSUER", ""))
        return payload

    def retrieve_matching_jwk(self, token):
        # Not the library's: it fails with a KeyError on a token without a kid, which a provider
        # with a single key may send.
        response = requests.get(self.OIDC_OP_JWKS_ENDPOINT, timeout=self.get_settings("OIDC_TIMEOUT", None))
        response.raise_for_status()
        jwks = response.json()
        return jwt.PyJWK(signing_key(jwks if isinstance(jwks, dict) else {}, jwt.get_unverified_header(token)))

    def get_or_create_user(self, access_token, id_token, payload):
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload.get("sub"):
            raise SignInRefused(FAILED)  # OIDC Core 5.3.2: userinfo must be about the token's subject
        return sso_user_sign_in(
            issuer=str(payload.get("iss") or ""),
            claims={**payload, **userinfo},
            claim=settings.OIDC_ROLES_CLAIM,
            role_map=settings.OIDC_ROLE_MAP,
        )


class SsoOnlyMixin:
    """The single sign-on pages exist only when it is configured."""

    def dispatch(self, request, *args, **kwargs):
        if not settings.SSO_ENABLED:
            raise Http404("Single sign-on is not configured.")
        return super().dispatch(request, *args, **kwargs)


class SsoStartView(SsoOnlyMixin, OIDCAuthenticationRequestView):
    """Sends the browser to the provider; `next` is kept only when it is on this site
    (mozilla-django-oidc's get_next_url)."""

    get_settings = staticmethod(provider_setting)

    def __init__(self, *args, **kwargs):
        # Not the library's: it reads the endpoint here, before dispatch() knows whether single
        # sign-on is on, and discovery may need the provider.
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)

    def get(self, request):
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        try:
            self.OIDC_OP_AUTH_ENDPOINT = self.get_settings("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except ProviderUnreachable as exc:
            log.error("single sign-on: %s", exc)
            messages.error(request, UNREACHABLE)
            return HttpResponseRedirect(reverse("login"))
        return super().get(request)


class SsoCallbackView(SsoOnlyMixin, OIDCAuthenticationCallbackView):
    """The provider's answer: signs the person in, or back to the sign-in page saying why not."""

    get_settings = staticmethod(provider_setting)

    def get(self, request):
        if "code" not in request.GET:
            return super().get(request)  # the provider's error answer: the library ends it
        states = request.session.get("oidc_states") or {}
        state = request.GET.get("state")
        if state not in states:
            # The library answers a bare 400 here: an answer opened again (it consumed the state
            # at the first sign-in), a changed state, or one from another browser.
            return self._refused(STALE)
        try:
            refusal = response_issuer_refusal(
                given=request.GET.get("iss"),
                issuer=self.get_settings("OIDC_OP_ISSUER", ""),
                advertised=self.get_settings("OIDC_OP_ISS_PARAMETER_SUPPORTED", False) is True,
            )
        except ProviderUnreachable as exc:
            log.error("single sign-on: %s", exc)
            refusal = UNREACHABLE
        if refusal:
            # Spent, as the library does with a state it uses: the same answer cannot be tried again.
            del states[state]
            request.session.save()
            log.warning("single sign-on refused: %s", refusal)
            return self._refused(refusal if refusal == UNREACHABLE else REFUSED.format(why=refusal))
        return super().get(request)

    def _refused(self, sentence: str):
        messages.error(self.request, sentence)
        return HttpResponseRedirect(self.failure_url)

    def login_failure(self):
        messages.error(self.request, getattr(self.request, "sso_refusal", FAILED))
        return super().login_failure()


class SignOutView(LogoutView):
    """Ends this site's session; for a person signed in through the provider, then also the
    provider's (its end_session_endpoint, when it has one and OIDC_PROVIDER_SIGN_OUT is on)."""

    def post(self, request, *args, **kwargs):
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        end_session = self._end_session_endpoint() if id_token else ""
        if not end_session:
            return response
        query = urlencode(
            {
                "id_token_hint": id_token,
                "client_id": settings.OIDC_RP_CLIENT_ID,
                "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
            }
        )
        return HttpResponseRedirect(f"{end_session}{'&' if '?' in end_session else '?'}{query}")

    @staticmethod
    def _end_session_endpoint() -> str:
        if not (settings.SSO_ENABLED and settings.OIDC_PROVIDER_SIGN_OUT):
            return ""
        try:
            return provider_setting("OIDC_OP_END_SESSION_ENDPOINT", "")
        except ProviderUnreachable as exc:  # this site's session is over anyway
            log.error("single sign-on: sign-out at the provider skipped: %s", exc)
            return ""
