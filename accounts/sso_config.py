"""Single sign-on settings: every OIDC_* variable (and LOCAL_SIGNIN) read and checked in one place.

agentsite/settings.py puts what `sso_settings(os.environ)` returns into the settings module, where
mozilla-django-oidc reads the names it knows (OIDC_RP_CLIENT_ID, OIDC_OP_TOKEN_ENDPOINT, ...).
Nothing is set unless OIDC_RP_CLIENT_ID is; a half-done configuration (a client id without its
secret, endpoints without a role map, ...) stops the process at start with the missing names,
rather than failing at the first person's sign-in. Plain data in, plain data out: no Django
import here, so it runs before Django is set up.
"""

from collections.abc import Mapping
from urllib.parse import urlsplit

# The project's roles (runs/roles.py ROLES) by the names OIDC_ROLE_MAP uses.
ROLE_GROUPS = {"viewer": "viewers", "operator": "operators", "admin": "admins"}
SIGN_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "HS256", "HS384", "HS512")
ENDPOINTS = ("OIDC_OP_AUTHORIZATION_ENDPOINT", "OIDC_OP_TOKEN_ENDPOINT", "OIDC_OP_USER_ENDPOINT")
# Every variable that belongs to single sign-on: one of them set without a client id is a mistake.
VARIABLES = (
    "OIDC_RP_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET",
    "OIDC_RP_SIGN_ALGO",
    "OIDC_RP_SCOPES",
    "OIDC_OP_DISCOVERY_URL",
    "OIDC_OP_ISSUER",
    *ENDPOINTS,
    "OIDC_OP_JWKS_ENDPOINT",
    "OIDC_OP_END_SESSION_ENDPOINT",
    "OIDC_PROVIDER_SIGN_OUT",
    "OIDC_ROLES_CLAIM",
    "OIDC_ROLE_MAP",
    "OIDC_PROVIDER_NAME",
    "OIDC_ALLOW_HTTP",
    "OIDC_TIMEOUT_SECONDS",
)
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
SSO_BACKEND = "accounts.oidc.SsoBackend"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
ON, OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class SsoConfigError(ValueError):
    """What is wrong with the single sign-on variables, in a sentence for whoever deploys."""


def parse_role_map(text: str) -> dict[str, str]:
    """ "agentsite-admins=admin,agentsite-operators=operator" -> {group claim value: role}. A role
    may name a project by its slug, "billing-operators=operator@billing": a role in that project
    only; without one, the role holds in every project (the platform team)."""
    role_map: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        value, sep, role = (piece.strip() for piece in entry.rpartition("="))
        if not sep or not value:
            raise SsoConfigError(f"OIDC_ROLE_MAP: {entry!r} is not group=role")
        base, at, project = role.partition("@")
        if base not in ROLE_GROUPS:
            raise SsoConfigError(f"OIDC_ROLE_MAP: {entry!r} names no role; roles are {', '.join(ROLE_GROUPS)}"
                                 " (optionally @project-slug)")
        if at and not project:
            raise SsoConfigError(f"OIDC_ROLE_MAP: {entry!r} names no project after @")
        if role_map.get(value, role) != role:
            raise SsoConfigError(f"OIDC_ROLE_MAP: {value!r} is mapped to both {role_map[value]} and {role}")
        role_map[value] = role
    return role_map


def _switch(environ: Mapping[str, str], name: str, default: bool) -> bool:
    value = environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in ON or value in OFF:
        return value in ON
    raise SsoConfigError(f"{name} must be on or off, got {environ[name]!r}")


def _check_url(name: str, url: str, *, allow_http: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise SsoConfigError(f"{name} must be an http(s) URL, got {url!r}")
    # The code and tokens travel to these: plain http only on this machine, or when told to.
    if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS and not allow_http:
        raise SsoConfigError(f"{name} must use https (or set OIDC_ALLOW_HTTP=on), got {url!r}")


def sso_settings(environ: Mapping[str, str]) -> dict:
    """The settings single sign-on and LOCAL_SIGNIN make of these variables; SsoConfigError when
    they do not add up."""
    get = {name: environ.get(name, "").strip() for name in VARIABLES}
    local_signin = _switch(environ, "LOCAL_SIGNIN", True)
    if not get["OIDC_RP_CLIENT_ID"]:
        stray = [name for name in VARIABLES if get[name]]
        if stray:
            raise SsoConfigError(f"OIDC is half configured: {', '.join(stray)} set but OIDC_RP_CLIENT_ID is not")
        if not local_signin:
            raise SsoConfigError(
                "LOCAL_SIGNIN=off needs single sign-on (OIDC_RP_CLIENT_ID and friends): nobody could sign in"
            )
        return {"SSO_ENABLED": False, "LOCAL_SIGNIN": True}

    missing = [name for name in ("OIDC_RP_CLIENT_SECRET", "OIDC_ROLE_MAP") if not get[name]]
    algorithm = get["OIDC_RP_SIGN_ALGO"] or "RS256"
    if algorithm not in SIGN_ALGORITHMS:
        raise SsoConfigError(f"OIDC_RP_SIGN_ALGO must be one of {', '.join(SIGN_ALGORITHMS)}, got {algorithm!r}")
    # Each endpoint named, and a key set to check RS/ES signatures; else discovery fills the gaps.
    unnamed = [name for name in ENDPOINTS if not get[name]]
    if not algorithm.startswith("HS") and not get["OIDC_OP_JWKS_ENDPOINT"]:
        unnamed.append("OIDC_OP_JWKS_ENDPOINT")
    discovery = get["OIDC_OP_DISCOVERY_URL"]
    if not discovery and get["OIDC_OP_ISSUER"] and unnamed:
        discovery = get["OIDC_OP_ISSUER"].rstrip("/") + "/.well-known/openid-configuration"
    if not discovery and not get["OIDC_OP_ISSUER"]:
        # Named endpoints still need the issuer: the ID token's iss is checked against it, and
        # without it any issuer's token would do.
        why = "; with it the endpoints come from its discovery document" if unnamed else ""
        missing += [*unnamed, f"OIDC_OP_ISSUER (the issuer ID tokens must come from{why})"]
    if missing:
        raise SsoConfigError(f"OIDC is half configured: missing {', '.join(missing)}")

    allow_http = _switch(environ, "OIDC_ALLOW_HTTP", False)
    urls = {name: get[name] for name in (*ENDPOINTS, "OIDC_OP_JWKS_ENDPOINT", "OIDC_OP_END_SESSION_ENDPOINT")}
    for name, url in [*urls.items(), ("OIDC_OP_DISCOVERY_URL", discovery)]:
        if url:
            _check_url(name, url, allow_http=allow_http)
    try:
        timeout = float(get["OIDC_TIMEOUT_SECONDS"] or 10)
    except ValueError:
        raise SsoConfigError(f"OIDC_TIMEOUT_SECONDS must be a number, got {get['OIDC_TIMEOUT_SECONDS']!r}") from None
    scopes = get["OIDC_RP_SCOPES"] or "openid email profile"
    if "openid" not in scopes.split():
        raise SsoConfigError(f"OIDC_RP_SCOPES must include openid, got {scopes!r}")

    role_map = parse_role_map(get["OIDC_ROLE_MAP"])
    if not role_map:
        raise SsoConfigError("OIDC_ROLE_MAP maps no group to a role: nobody could sign in")

    provider_sign_out = _switch(environ, "OIDC_PROVIDER_SIGN_OUT", True)
    return {
        "SSO_ENABLED": True,
        "LOCAL_SIGNIN": local_signin,
        # Without ModelBackend no password opens anything: the login form, the API's token
        # endpoint, the admin's login; sessions signed in by password end too.
        "AUTHENTICATION_BACKENDS": [MODEL_BACKEND, SSO_BACKEND] if local_signin else [SSO_BACKEND],
        "OIDC_RP_CLIENT_ID": get["OIDC_RP_CLIENT_ID"],
        "OIDC_RP_CLIENT_SECRET": get["OIDC_RP_CLIENT_SECRET"],
        "OIDC_RP_SIGN_ALGO": algorithm,
        "OIDC_RP_SCOPES": scopes,
        "OIDC_OP_DISCOVERY_URL": discovery,
        "OIDC_OP_ISSUER": get["OIDC_OP_ISSUER"],
        **urls,
        "OIDC_PROVIDER_SIGN_OUT": provider_sign_out,
        "OIDC_ROLES_CLAIM": get["OIDC_ROLES_CLAIM"] or "groups",
        "OIDC_ROLE_MAP": role_map,
        "OIDC_PROVIDER_NAME": get["OIDC_PROVIDER_NAME"] or "single sign-on",
        "OIDC_TIMEOUT": timeout,
        "OIDC_USE_PKCE": True,
        "OIDC_USE_NONCE": True,
        # Kept in the session for sign-out at the provider (its id_token_hint), and only then.
        "OIDC_STORE_ID_TOKEN": provider_sign_out,
        "LOGIN_REDIRECT_URL_FAILURE": "/login/",
    }
