"""Who is acting, for the audit log: the person of the request being served (a page, the admin,
or the API with a token), with their address. Set by AuditActorMiddleware for sessions and by
the API's token authentication; unset (the system) in commands, workers and migrations."""
import contextvars
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Actor:
    user_id: int | None
    name: str
    via: str  # page, admin, api
    address: str | None


_current: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("audit_actor", default=None)
_request: contextvars.ContextVar = contextvars.ContextVar("audit_request", default=None)


def current_actor() -> Actor | None:
    actor = _current.get()
    if actor is not None:
        return actor
    request = _request.get()
    user = getattr(request, "user", None) if request is not None else None
    if user is not None and user.is_authenticated:  # a session: read lazily, as the view reads it
        via = "admin" if request.path.startswith("/admin/") else "page"
        return Actor(user.pk, user.get_username(), via, request_address(request))
    return None


def current_door() -> str:
    """Where an action without a signed-in person came from: "page" while a request is served
    (single sign-on creating an account, a sign-in failing), else "command"."""
    return "page" if _request.get() is not None else "command"


def actor_set(*, user, via: str, request=None) -> None:
    """The person a token authenticated (DRF authenticates inside the view, after middleware)."""
    _current.set(Actor(user.pk, user.get_username(), via, request_address(request) if request is not None else None))


def request_address(request) -> str | None:
    return client_ip(request) or None


def client_ip(request) -> str:
    """The client's address: the connection's, or behind TRUSTED_PROXY_COUNT proxies the one the
    outermost trusted proxy saw. With no trusted proxy a client's X-Forwarded-For is ignored: it
    would let anyone choose the address a limit counts against (DRF's get_ident uses it then).
    So is a header with fewer hops than trusted proxies: every trusted proxy appends one, so its
    first hop would be the client's own claim (DRF's get_ident takes it then)."""
    proxies = settings.REST_FRAMEWORK.get("NUM_PROXIES") or 0
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    if proxies and len(hops) >= proxies:
        return hops[-proxies]
    return request.META.get("REMOTE_ADDR", "")


class AuditActorMiddleware:
    """Makes the request known to the audit log for the time it is served."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_token = _request.set(request)
        actor_token = _current.set(None)
        try:
            return self.get_response(request)
        finally:
            _current.reset(actor_token)
            _request.reset(request_token)
