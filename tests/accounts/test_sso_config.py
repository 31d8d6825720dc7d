"""The single sign-on variables: off when unset, a clear error at start when half set."""

import os
import subprocess
import sys

import pytest

from accounts.sso_config import MODEL_BACKEND, SSO_BACKEND, SsoConfigError, parse_role_map, sso_settings
from tests.conftest import ROOT

EXPLICIT = {
    "OIDC_RP_CLIENT_ID": "agentsite",
    "OIDC_RP_CLIENT_SECRET": "s3cret",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://idp.example.com/authorize",
    "OIDC_OP_TOKEN_ENDPOINT": "https://idp.example.com/token",
    "OIDC_OP_USER_ENDPOINT": "https://idp.example.com/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://idp.example.com/jwks",
    "OIDC_OP_ISSUER": "https://idp.example.com",
    "OIDC_ROLE_MAP": "agentsite-admins=admin,agentsite-operators=operator,everyone=viewer",
}


def without(*names: str) -> dict:
    return {name: value for name, value in EXPLICIT.items() if name not in names}


def test_nothing_set_means_single_sign_on_off_and_passwords_on():
    assert sso_settings({}) == {"SSO_ENABLED": False, "LOCAL_SIGNIN": True}


def test_explicit_endpoints_configure_the_library():
    config = sso_settings(EXPLICIT)
    assert config["SSO_ENABLED"] and config["LOCAL_SIGNIN"]
    assert config["AUTHENTICATION_BACKENDS"] == [MODEL_BACKEND, SSO_BACKEND]
    assert config["OIDC_OP_TOKEN_ENDPOINT"] == "https://idp.example.com/token"
    assert config["OIDC_RP_SIGN_ALGO"] == "RS256"
    assert config["OIDC_ROLES_CLAIM"] == "groups"
    assert config["OIDC_ROLE_MAP"] == {
        "agentsite-admins": "admin",
        "agentsite-operators": "operator",
        "everyone": "viewer",
    }
    assert config["OIDC_USE_PKCE"] and config["OIDC_USE_NONCE"]


def test_named_endpoints_without_an_issuer_refuse_to_start():
    """The ID token's `iss` is checked against OIDC_OP_ISSUER: without it (nor a discovery document
    to read it from) any issuer's token would do."""
    with pytest.raises(SsoConfigError, match="missing OIDC_OP_ISSUER"):
        sso_settings(without("OIDC_OP_ISSUER"))
    document = "https://idp.example.com/.well-known/openid-configuration"
    discovered = sso_settings({**without("OIDC_OP_ISSUER"), "OIDC_OP_DISCOVERY_URL": document})
    assert discovered["OIDC_OP_ISSUER"] == ""  # read from the document at sign-in


def test_with_every_endpoint_named_no_discovery_document_is_read():
    assert sso_settings(EXPLICIT)["OIDC_OP_DISCOVERY_URL"] == ""
    # The key set left out: it comes from the issuer's discovery document.
    partly = sso_settings(without("OIDC_OP_JWKS_ENDPOINT"))
    assert partly["OIDC_OP_DISCOVERY_URL"] == "https://idp.example.com/.well-known/openid-configuration"


def test_an_issuer_stands_for_the_endpoints_through_discovery():
    client = {name: EXPLICIT[name] for name in ("OIDC_RP_CLIENT_ID", "OIDC_RP_CLIENT_SECRET", "OIDC_ROLE_MAP")}
    config = sso_settings({**client, "OIDC_OP_ISSUER": "https://idp.example.com/realms/x/"})
    assert config["OIDC_OP_DISCOVERY_URL"] == "https://idp.example.com/realms/x/.well-known/openid-configuration"
    assert config["OIDC_OP_TOKEN_ENDPOINT"] == ""  # read from the discovery document at sign-in


def test_local_signin_off_leaves_only_the_single_sign_on_backend():
    config = sso_settings({**EXPLICIT, "LOCAL_SIGNIN": "off"})
    assert config["LOCAL_SIGNIN"] is False
    assert config["AUTHENTICATION_BACKENDS"] == [SSO_BACKEND]


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (without("OIDC_RP_CLIENT_SECRET"), "missing OIDC_RP_CLIENT_SECRET"),
        (without("OIDC_RP_CLIENT_ID"), "set but OIDC_RP_CLIENT_ID is not"),
        ({"OIDC_ROLE_MAP": "x=viewer"}, "OIDC_ROLE_MAP set but OIDC_RP_CLIENT_ID is not"),
        (without("OIDC_ROLE_MAP"), "missing OIDC_ROLE_MAP"),
        (without("OIDC_OP_TOKEN_ENDPOINT", "OIDC_OP_ISSUER"), "missing OIDC_OP_TOKEN_ENDPOINT"),
        (without("OIDC_OP_JWKS_ENDPOINT", "OIDC_OP_ISSUER"), "missing OIDC_OP_JWKS_ENDPOINT"),
        ({**EXPLICIT, "OIDC_RP_SIGN_ALGO": "none"}, "OIDC_RP_SIGN_ALGO must be one of"),
        ({**EXPLICIT, "OIDC_ROLE_MAP": "agentsite-admins=root"}, "names no role"),
        ({**EXPLICIT, "OIDC_ROLE_MAP": " , "}, "maps no group to a role"),
        ({**EXPLICIT, "OIDC_OP_TOKEN_ENDPOINT": "http://idp.example.com/token"}, "must use https"),
        ({**EXPLICIT, "OIDC_RP_SCOPES": "email profile"}, "must include openid"),
        ({**EXPLICIT, "LOCAL_SIGNIN": "maybe"}, "LOCAL_SIGNIN must be on or off"),
        ({"LOCAL_SIGNIN": "off"}, "nobody could sign in"),
    ],
)
def test_half_configured_single_sign_on_is_an_error_naming_what_is_missing(environ, message):
    with pytest.raises(SsoConfigError, match=message):
        sso_settings(environ)


def test_hs256_needs_no_key_set_and_plain_http_is_allowed_on_loopback_or_when_told():
    sso_settings({**without("OIDC_OP_JWKS_ENDPOINT"), "OIDC_RP_SIGN_ALGO": "HS256"})
    sso_settings({**EXPLICIT, "OIDC_OP_TOKEN_ENDPOINT": "http://127.0.0.1:8080/token"})
    sso_settings({**EXPLICIT, "OIDC_OP_TOKEN_ENDPOINT": "http://keycloak:8080/token", "OIDC_ALLOW_HTTP": "on"})


def test_role_map_entries():
    # The role is after the last "=", so a value may hold one (an LDAP-style name, no commas).
    assert parse_role_map("cn=ops=operator, everyone = viewer,,") == {"cn=ops": "operator", "everyone": "viewer"}
    with pytest.raises(SsoConfigError, match="mapped to both"):
        parse_role_map("ops=operator,ops=admin")
    with pytest.raises(SsoConfigError, match="is not group=role"):
        parse_role_map("operator")


def test_the_site_refuses_to_start_when_single_sign_on_is_half_configured():
    env = {key: value for key, value in os.environ.items() if not key.startswith("OIDC_")}
    env.update(OIDC_RP_CLIENT_ID="agentsite", OIDC_OP_ISSUER="https://idp.example.com")
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "ImproperlyConfigured: OIDC is half configured: missing OIDC_RP_CLIENT_SECRET, OIDC_ROLE_MAP" in done.stderr
