"""The sign-in page, the password paths with LOCAL_SIGNIN=off, and the start of single sign-on
(no provider needed: the browser tests talk to a real one)."""

import time
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.test import RequestFactory
from rest_framework.test import APIClient

from accounts.oidc import SsoBackend
from accounts.sso_config import MODEL_BACKEND, SSO_BACKEND, sso_settings

ENV = {
    "OIDC_RP_CLIENT_ID": "agentsite",
    "OIDC_RP_CLIENT_SECRET": "s3cret-of-the-client-0123456789abcdef",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://idp.example.com/authorize",
    "OIDC_OP_TOKEN_ENDPOINT": "https://idp.example.com/token",
    "OIDC_OP_USER_ENDPOINT": "https://idp.example.com/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://idp.example.com/jwks",
    "OIDC_OP_ISSUER": "https://idp.example.com",
    "OIDC_ROLE_MAP": "everyone=viewer",
    "OIDC_PROVIDER_NAME": "Example SSO",
}


def configure(settings, **env) -> None:
    for name, value in sso_settings({**ENV, **env}).items():
        setattr(settings, name, value)


@pytest.fixture
def sso_only(settings, db):
    configure(settings, LOCAL_SIGNIN="off")


@pytest.fixture
def person(db):
    return User.objects.create_superuser("pat", "pat@example.com", "pw-pat-123456789")


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_without_single_sign_on_the_page_has_only_the_password_form(client, db):
    page = client.get("/login/").content.decode()
    assert 'name="password"' in page and "sso-signin" not in page
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404


def test_with_both_the_page_offers_both(client, settings, db):
    configure(settings)
    page = client.get("/login/?next=/runs/%3Fstatus%3Dfailed").content.decode()
    assert 'name="password"' in page
    assert 'href="/oidc/authenticate/?next=/runs/%3Fstatus%3Dfailed"' in page and "Sign in with Example SSO" in page


def test_local_signin_off_hides_the_form_and_refuses_the_password(client, sso_only, person):
    page = client.get("/login/").content.decode()
    assert 'name="password"' not in page and "Sign in with Example SSO" in page
    response = client.post("/login/", {"username": "pat", "password": "pw-pat-123456789"})
    assert response.status_code == 403 and not signed_in(client)


def test_local_signin_off_refuses_a_token_for_a_password(sso_only, person):
    response = APIClient().post("/api/v1/token/", {"username": "pat", "password": "pw-pat-123456789"}, format="json")
    assert response.status_code == 403
    assert "Password sign-in is switched off" in response.json()["detail"]


def test_local_signin_off_refuses_the_admin_login(client, sso_only, person):
    client.post("/admin/login/?next=/admin/", {"username": "pat", "password": "pw-pat-123456789"})
    assert not signed_in(client)
    assert client.get("/admin/").status_code == 302


def test_local_signin_off_ends_sessions_signed_in_by_password(client, settings, person):
    client.force_login(person, backend=MODEL_BACKEND)
    assert client.get("/runs/").status_code == 200
    configure(settings, LOCAL_SIGNIN="off")
    response = client.get("/runs/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def start(client, next_url: str):
    response = client.get("/oidc/authenticate/", {"next": next_url})
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    return location, {name: values[0] for name, values in parse_qs(location.query).items()}


def test_sign_in_starts_at_the_provider_with_state_nonce_and_pkce(client, sso_only):
    location, query = start(client, "/runs/")
    assert f"{location.scheme}://{location.netloc}{location.path}" == ENV["OIDC_OP_AUTHORIZATION_ENDPOINT"]
    assert query["client_id"] == "agentsite" and query["response_type"] == "code"
    assert query["redirect_uri"] == "http://testserver/oidc/callback/"
    assert set(query["scope"].split()) == {"openid", "email", "profile"}
    assert len(query["state"]) >= 32 and len(query["nonce"]) >= 32
    assert query["code_challenge_method"] == "S256" and query["code_challenge"]
    assert client.session["oidc_login_next"] == "/runs/"


@pytest.mark.parametrize("next_url", ["https://evil.example/", "//evil.example/", "javascript:alert(1)"])
def test_a_next_elsewhere_is_dropped(client, sso_only, next_url):
    start(client, next_url)
    assert client.session["oidc_login_next"] is None


def test_a_callback_with_an_unknown_state_is_refused_on_the_sign_in_page(client, sso_only):
    start(client, "/runs/")
    response = client.get("/oidc/callback/", {"code": "c", "state": "not-the-one"}, follow=True)
    assert response.redirect_chain[-1][0] == "/login/"
    assert "does not belong to a sign-in started in this browser" in response.content.decode()
    assert not signed_in(client)


def id_token(**claims) -> str:
    now = int(time.time())
    body = {"iss": ENV["OIDC_OP_ISSUER"], "aud": "agentsite", "sub": "u-1", "nonce": "n", "iat": now, "exp": now + 60}
    return jwt.encode({**body, **claims}, ENV["OIDC_RP_CLIENT_SECRET"], algorithm="HS256")


@pytest.fixture
def backend(settings):
    configure(settings, OIDC_RP_SIGN_ALGO="HS256")
    backend = SsoBackend()
    backend._read_endpoints()
    return backend


def test_an_id_token_for_this_client_from_the_issuer_is_accepted(backend):
    assert backend.verify_token(id_token(), nonce="n")["sub"] == "u-1"


@pytest.mark.parametrize(
    ("claims", "nonce", "why"),
    [
        ({"aud": "another-client"}, "n", "another application"),
        ({"iss": "https://evil.example.com"}, "n", "another issuer"),
        ({}, "replayed", "Nonce"),
    ],
)
def test_an_id_token_for_another_client_issuer_or_nonce_is_refused(backend, claims, nonce, why):
    with pytest.raises(SuspiciousOperation, match=why):
        backend.verify_token(id_token(**claims), nonce=nonce)


def test_a_password_sign_in_never_starts_a_code_exchange(settings, monkeypatch):
    configure(settings)
    request = RequestFactory().post("/login/?code=c&state=s")
    exchanges = []  # the backend swallows the provider's errors: watch for the exchange itself
    monkeypatch.setattr(SsoBackend, "get_token", lambda self, payload: exchanges.append(payload) or {})
    assert SsoBackend().authenticate(request, username="pat", password="pw") is None
    assert exchanges == []
    assert settings.AUTHENTICATION_BACKENDS == [MODEL_BACKEND, SSO_BACKEND]


def test_a_provider_that_does_not_answer_is_said_so_on_the_sign_in_page(client, settings, person):
    from tests.conftest import free_port

    client.force_login(person, backend=MODEL_BACKEND)  # signed in before the provider went away
    closed = f"http://127.0.0.1:{free_port()}"
    configure(
        settings,
        OIDC_OP_ISSUER=closed,
        OIDC_OP_AUTHORIZATION_ENDPOINT="",
        OIDC_OP_TOKEN_ENDPOINT="",
        OIDC_OP_USER_ENDPOINT="",
        OIDC_OP_JWKS_ENDPOINT="",
    )
    assert client.get("/runs/").status_code == 200  # sessions never ask the provider
    client.logout()
    response = client.get("/oidc/authenticate/", {"next": "/runs/"}, follow=True)
    assert response.redirect_chain[-1][0] == "/login/"
    assert "The identity provider could not be reached" in response.content.decode()
    # Password sign-in still works while it is away.
    assert client.post("/login/", {"username": "pat", "password": "pw-pat-123456789"}).status_code == 302


def test_a_deactivated_persons_single_sign_on_session_ends(client, settings, person):
    configure(settings)
    client.force_login(person, backend=SSO_BACKEND)
    assert client.get("/runs/").status_code == 200
    User.objects.filter(pk=person.pk).update(is_active=False)
    assert client.get("/runs/").status_code == 302


def test_a_provider_that_answers_with_an_error_sends_back_to_the_sign_in_page(client, sso_only):
    start(client, "/runs/")
    response = client.get("/oidc/callback/", {"error": "access_denied", "state": "whatever"}, follow=True)
    assert response.redirect_chain[-1][0] == "/login/"
    assert "Single sign-on did not complete" in response.content.decode()
    assert not signed_in(client)


def signed_in_through_the_provider(client, person) -> None:
    client.force_login(person, backend=SSO_BACKEND)
    session = client.session
    session["oidc_id_token"] = "the-id-token"
    session.save()


def test_sign_out_ends_the_session_and_goes_to_the_providers_end_session_endpoint(client, settings, person):
    configure(settings, OIDC_OP_END_SESSION_ENDPOINT="https://idp.example.com/logout")
    signed_in_through_the_provider(client, person)
    response = client.post("/logout/")
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == "https://idp.example.com/logout"
    assert parse_qs(location.query) == {
        "id_token_hint": ["the-id-token"],
        "client_id": ["agentsite"],
        "post_logout_redirect_uri": ["http://testserver/login/"],
    }
    assert not signed_in(client)
    assert client.get("/runs/").status_code == 302


def test_sign_out_stays_here_when_told_or_when_signed_in_by_password(client, settings, person):
    configure(settings, OIDC_OP_END_SESSION_ENDPOINT="https://idp.example.com/logout", OIDC_PROVIDER_SIGN_OUT="off")
    assert settings.OIDC_STORE_ID_TOKEN is False
    signed_in_through_the_provider(client, person)
    assert client.post("/logout/")["Location"] == "/login/"
    configure(settings, OIDC_OP_END_SESSION_ENDPOINT="https://idp.example.com/logout")
    client.force_login(person, backend=MODEL_BACKEND)
    assert client.post("/logout/")["Location"] == "/login/"
    assert not signed_in(client)
