"""Single sign-on against a real OpenID Connect provider (django-oauth-toolkit, its own process,
tests/accounts/oidc_provider) without a browser: the test plays the browser with requests at the
provider and Django's test client here, so it can also do what a hostile or odd answer does
(another client's token, a missing key id, a changed `state`, `iss` or replayed callback)."""

from html import unescape
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest
import requests
from django.contrib.auth.models import User

from accounts.models import SsoIdentity
from accounts.sso_config import sso_settings
from tests.accounts.browser.provider import CLIENT_ID, CLIENT_SECRET, PASSWORD, ROLE_MAP, IdentityProvider

SITE = "http://testserver"
OPERATORS = "agentsite-operators"
pytestmark = pytest.mark.worker  # a real OpenID Connect provider process


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    provider = IdentityProvider(tmp_path_factory.mktemp("op"))
    provider.seed(
        client={
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "redirect_uri": f"{SITE}/oidc/callback/",
            "post_logout_redirect_uri": f"{SITE}/login/",
        }
    )
    provider.person("olivia", OPERATORS)
    provider.start()
    yield provider
    provider.stop()


@pytest.fixture
def op(provider, settings, db):
    """The provider, answering as usual at the start of each test, and this site set up to use it
    through its issuer (discovery) with password sign-in off."""
    provider.quirks()
    env = {
        "OIDC_RP_CLIENT_ID": CLIENT_ID,
        "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_OP_ISSUER": provider.issuer,
        "OIDC_ROLE_MAP": ROLE_MAP,
        "OIDC_PROVIDER_NAME": "Test IdP",
        "LOCAL_SIGNIN": "off",
    }
    for name, value in sso_settings(env).items():
        setattr(settings, name, value)
    yield provider
    provider.quirks()


def provider_answer(client, username: str = "olivia") -> str:
    """Starts single sign-on here, signs in at the provider as `username`; the URL the provider
    sends the browser back to (this site's callback, with code, state and iss)."""
    start = client.get("/oidc/authenticate/", {"next": "/runs/"})
    assert start.status_code == 302
    browser = requests.Session()
    login_page = browser.get(start["Location"], timeout=30)  # the provider's sign-in page
    assert login_page.status_code == 200 and 'id="op-login"' in login_page.text
    answer = browser.post(
        login_page.url,
        data={
            "username": username,
            "password": PASSWORD,
            "csrfmiddlewaretoken": browser.cookies["op_csrftoken"],
            "next": parse_qs(urlsplit(login_page.url).query)["next"][0],
        },
        allow_redirects=False,
        timeout=30,
    )
    while not answer.headers["Location"].startswith(SITE):  # back to the authorization endpoint
        location = requests.compat.urljoin(answer.url, answer.headers["Location"])
        answer = browser.get(location, allow_redirects=False, timeout=30)
        assert answer.status_code == 302, answer.text[:2000]
    return answer.headers["Location"]


def with_query(url: str, **changes) -> str:
    """`url` with query parameters replaced (a value of None drops the parameter)."""
    parts = urlsplit(url)
    query = {name: values[0] for name, values in parse_qs(parts.query).items()}
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = value
    return urlunsplit(parts._replace(query=urlencode(query)))


def callback(client, url: str):
    """The browser opening the provider's answer here; the page it ends on and whether it is signed in."""
    response = client.get(url, follow=True)
    return response, "_auth_user_id" in client.session


def sign_in_page_says(response, sentence: str) -> bool:
    return response.redirect_chain[-1][0] == "/login/" and sentence in unescape(response.content.decode())


def test_signing_in_at_the_provider_signs_in_here_with_the_role_its_groups_give(client, op):
    answer = provider_answer(client)
    assert parse_qs(urlsplit(answer).query)["iss"] == [op.issuer]  # RFC 9207: the provider says who answers
    response, signed_in = callback(client, answer)
    assert signed_in and response.redirect_chain[-1][0] == "/runs/"
    user = User.objects.get(username="olivia")
    assert SsoIdentity.objects.get(user=user).issuer == op.issuer
    assert user.groups.filter(name="operators").exists()


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": [CLIENT_ID, "another-client"], "azp": "another-client"},
        {"aud": [CLIENT_ID, "another-client"]},  # several audiences: azp must say which
        {"azp": "another-client"},
    ],
    ids=["several-audiences-azp-another", "several-audiences-no-azp", "azp-another"],
)
def test_an_id_token_issued_to_another_client_is_refused(client, op, claims):
    op.quirks(id_token_claims=claims)
    response, signed_in = callback(client, provider_answer(client))
    assert not signed_in
    assert sign_in_page_says(response, "issued to another application")
    assert not User.objects.filter(username="olivia").exists()


def test_an_id_token_for_several_audiences_authorized_for_this_client_is_accepted(client, op):
    op.quirks(id_token_claims={"aud": [CLIENT_ID, "another-client"], "azp": CLIENT_ID})
    _response, signed_in = callback(client, provider_answer(client))
    assert signed_in


@pytest.mark.parametrize(
    "iss", ["https://evil.example/o", None], ids=["another-issuer", "missing-though-advertised"]
)
def test_an_answer_whose_iss_parameter_is_not_the_issuers_is_refused(client, op, iss):
    answer = provider_answer(client)
    response, signed_in = callback(client, with_query(answer, iss=iss))
    assert not signed_in
    assert sign_in_page_says(response, "did not come from the identity provider this site uses")
    # Refused before the code was used: opening the untouched answer now finds the state spent.
    response, signed_in = callback(client, answer)
    assert not signed_in and sign_in_page_says(response, "sign in again")


def test_an_id_token_without_a_key_id_from_a_provider_with_one_key_is_accepted(client, op):
    op.quirks(no_kid=True)
    _response, signed_in = callback(client, provider_answer(client))
    assert signed_in


def test_an_id_token_without_a_key_id_from_a_provider_with_several_keys_is_refused(client, op, caplog):
    op.quirks(no_kid=True, second_key=True)
    response, signed_in = callback(client, provider_answer(client))
    assert not signed_in
    assert sign_in_page_says(response, "does not say which of the provider's keys signed it")
    assert "KeyError" not in caplog.text


def test_a_changed_state_shows_the_sign_in_page_with_a_sentence(client, op):
    answer = provider_answer(client)
    response, signed_in = callback(client, with_query(answer, state="a-state-this-browser-never-sent"))
    assert response.status_code == 200 and not signed_in
    assert sign_in_page_says(response, "does not belong to a sign-in started in this browser")


def test_the_callback_opened_again_after_signing_in_shows_the_sign_in_page_with_a_sentence(client, op):
    answer = provider_answer(client)
    _response, signed_in = callback(client, answer)
    assert signed_in
    response, _ = callback(client, answer)  # the back button, a reload, a bookmark
    assert response.status_code == 200
    assert sign_in_page_says(response, "already used")


def test_a_provider_name_that_looks_like_a_local_accounts_gets_a_number(client, op):
    local = User.objects.create_superuser("admin", "root@example.com", "pw-admin-12345")
    op.quirks(preferred_username="\u0430dmin")  # a Cyrillic а: reads as admin
    _response, signed_in = callback(client, provider_answer(client))
    assert signed_in
    user = User.objects.get(pk=client.session["_auth_user_id"])
    assert user.pk != local.pk and user.username == "\u0430dmin-2" and not user.is_superuser
