"""Only the site's own pages open its websockets: the Origin a browser sends with the handshake must
be the origin the socket was asked at (scheme, host and port), or one of CSRF_TRUSTED_ORIGINS.

Why the port matters: a browser sends a host's cookies to every port of it, so a page served from
another port of the same host (another application, a developer's server) could open the approvals
socket with the person's session and decide. Channels' AllowedHostsOriginValidator compares the
host only. This is the check Django's CSRF protection makes of a form's POST, with the scheme's
default port filled in on both sides ("http://localhost" is "http://localhost:80"): the socket's
host is read as Django reads a request's (ALLOWED_HOSTS, USE_X_FORWARDED_HOST), its scheme from the
connection (wss is https) or, behind a proxy, from SECURE_PROXY_SSL_HEADER.
"""
import io
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.http.request import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_parts(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a web origin, the scheme's default port filled in; None when `url`
    is not an http(s) origin ("null", a file: page, garbage)."""
    try:
        parts = urlsplit(url.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme]


def socket_origin(scope) -> str | None:
    """The origin of the pages this socket belongs to: the scheme it was opened with and the Host
    it was asked at, read as Django reads an HTTP request's; None when the host is not allowed."""
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    request = ASGIRequest({**scope, "type": "http", "method": "GET", "scheme": scheme}, io.BytesIO())
    try:
        return f"{request.scheme}://{request.get_host()}"
    except DisallowedHost:
        return None


def _trusted(origin: tuple[str, str, int], pattern: str) -> bool:
    """Whether `origin` is the CSRF_TRUSTED_ORIGINS entry `pattern` ("https://*.example.com" holds
    example.com and its subdomains, as for Django's CSRF check)."""
    wildcard = "://*." in pattern
    trusted = origin_parts(pattern.replace("://*.", "://", 1) if wildcard else pattern)
    if trusted is None:
        return False
    scheme, host, port = origin
    return (scheme, port) == (trusted[0], trusted[2]) and (
        is_same_domain(host, "." + trusted[1]) if wildcard else host == trusted[1])


def origin_allowed(scope) -> bool:
    """Whether the handshake's Origin is the socket's own origin or a trusted one."""
    sent = [value for name, value in scope.get("headers", []) if name == b"origin"]
    if len(sent) != 1:
        return False
    origin = origin_parts(sent[0].decode("latin1"))
    if origin is None:
        return False
    own = socket_origin(scope)
    if own is not None and origin_parts(own) == origin:
        return True
    return any(_trusted(origin, pattern) for pattern in settings.CSRF_TRUSTED_ORIGINS)


class SameOriginOnly:
    """ASGI middleware for websockets: a handshake from another origin is refused (closed before
    the session is read or the consumer runs)."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            raise ValueError("SameOriginOnly guards websockets only")
        if not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
