"""Fixtures of the single sign-on browser tests: a real OpenID Connect provider process
(provider.py), this site served by daphne with single sign-on on and password sign-in off, and
Chromium. As in tests/browser, the processes start once for the package and the tests are
transactional (daphne only sees committed rows)."""

import pytest
import redis as redis_lib
from django.db import close_old_connections

from tests.accounts.browser.provider import CLIENT_ID, CLIENT_SECRET, PASSWORD, ROLE_MAP, IdentityProvider
from tests.browser import TIMEOUT_MS
from tests.browser.conftest import LiveServer, child_env, chromium_session
from tests.conftest import broker, redis_server  # noqa: F401  (fixtures used here)

SITE_REDIS_DB = 0


class SsoSite:
    def __init__(self, server: LiveServer, provider: IdentityProvider):
        self.server = server
        self.provider = provider
        self.url = server.url

    def logs(self) -> str:
        return (
            f"--- daphne log tail:\n{self.server.log()[-3000:]}\n--- provider log tail:\n{self.provider.log()[-3000:]}"
        )


@pytest.fixture(scope="package")
def sso_site(django_db_setup, redis_server, demo_server, tmp_path_factory):  # noqa: F811
    logs = tmp_path_factory.mktemp("sso")
    provider = IdentityProvider(logs)
    redis_url = redis_server.url(SITE_REDIS_DB)
    redis_lib.Redis.from_url(redis_url).flushdb()
    env = child_env(
        redis_url=redis_url,
        demo_model_url=demo_server.url,
        OIDC_RP_CLIENT_ID=CLIENT_ID,
        OIDC_RP_CLIENT_SECRET=CLIENT_SECRET,
        OIDC_RP_SIGN_ALGO="RS256",
        OIDC_OP_ISSUER=provider.issuer,
        OIDC_ROLES_CLAIM="groups",
        OIDC_ROLE_MAP=ROLE_MAP,
        OIDC_PROVIDER_NAME="Test IdP",
        LOCAL_SIGNIN="off",
    )
    server = LiveServer(env, logs / "daphne.log")
    try:
        provider.seed(
            client={
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uri": f"{server.url}/oidc/callback/",
                "post_logout_redirect_uri": f"{server.url}/login/",
            }
        )
        provider.start()
        server.wait_ready()
        yield SsoSite(server, provider)
    finally:
        server.stop()
        provider.stop()


@pytest.fixture
def site(sso_site, demo_data, broker, request):  # noqa: F811
    """The live site with the demo data; this process's runs go to a broker of this test's own."""
    yield sso_site
    if getattr(request.node, "rep_call", None) is None or request.node.rep_call.failed:
        print(sso_site.logs())
    close_old_connections()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def browser(site, monkeypatch, request, tmp_path):
    """Chromium against the live site, as in tests/browser (screenshots of a failed test too)."""
    with chromium_session(site.url, monkeypatch, request, tmp_path) as session:
        yield session


def new_person(browser):
    """A new browser context (a person with cookies of their own) and its page."""
    context = browser.chromium.new_context(base_url=browser.base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    return browser._watch(context.new_page())


def sign_in_at_provider(page, username: str) -> None:
    """On the provider's own sign-in page: its form, its password."""
    from playwright.sync_api import expect

    expect(page.locator("#op-login")).to_be_visible()
    page.locator("#op-username").fill(username)
    page.locator("#op-password").fill(PASSWORD)
    page.locator("#op-submit").click()
