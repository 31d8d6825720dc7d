"""The provider's endpoints: as configured, else from its discovery document.

The document is fetched at the first sign-in, not at start (a provider that is down must not
stop the site starting, nor password sign-in working), and kept for an hour; a failed fetch is
not kept, so the next sign-in tries again.
"""

import threading
import time

import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Setting name -> the discovery document's key for it.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_END_SESSION_ENDPOINT": "end_session_endpoint",
    "OIDC_OP_ISSUER": "issuer",
    # RFC 9207: the provider puts `iss` on its authorization responses, so a response without it is refused.
    "OIDC_OP_ISS_PARAMETER_SUPPORTED": "authorization_response_iss_parameter_supported",
}
KEEP_SECONDS = 3600
_lock = threading.Lock()
_cache: dict[str, tuple[float, dict]] = {}


class ProviderUnreachable(Exception):
    """The discovery document could not be read."""


def _document(url: str) -> dict:
    with _lock:
        kept = _cache.get(url)
        if kept and time.monotonic() - kept[0] < KEEP_SECONDS:
            return kept[1]
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnreachable(
            f"the identity provider's discovery document ({url}) could not be read: {exc}"
        ) from exc
    if not isinstance(document, dict):
        raise ProviderUnreachable(f"the identity provider's discovery document ({url}) is not an object")
    with _lock:
        _cache[url] = (time.monotonic(), document)
    return document


def provider_setting(name: str, *default):
    """A setting as mozilla-django-oidc asks for it; the provider's endpoints (and issuer) come
    from discovery when they are not configured."""
    value = getattr(settings, name, "")
    if name in DISCOVERED and not value and getattr(settings, "OIDC_OP_DISCOVERY_URL", ""):
        value = _document(settings.OIDC_OP_DISCOVERY_URL).get(DISCOVERED[name]) or ""
    if value in ("", None):
        if default:
            return default[0]
        raise ImproperlyConfigured(f"Setting {name} not found")  # as mozilla-django-oidc's own lookup
    return value
