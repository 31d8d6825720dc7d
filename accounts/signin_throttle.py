"""Failed sign-ins, counted per username and per client address, refused past a limit.

The counts live in Django's cache (Redis, shared by every web process), in fixed windows of
SIGNIN_WINDOW_SECONDS. Once a username has had SIGNIN_FAILURES_PER_USERNAME failures in the
current window, or an address SIGNIN_FAILURES_PER_IP, every sign-in for it is refused until the
window ends, even with the right password: otherwise the attacker's next guess would still be
checked. The dashboard's login page and the API's password endpoint both go through here.
"""

import hashlib
import logging
import time

from django.conf import settings
from django.core.cache import cache

from audit.context import client_ip  # noqa: F401 (the sign-in views import it from here)

log = logging.getLogger(__name__)


def _now() -> float:
    return time.time()


def _counters(*, username: str, ip: str) -> list[tuple[str, int]]:
    window = int(_now() // settings.SIGNIN_WINDOW_SECONDS)
    counters = []
    for kind, value, limit in (
        ("user", username.strip().casefold(), settings.SIGNIN_FAILURES_PER_USERNAME),
        ("ip", ip, settings.SIGNIN_FAILURES_PER_IP),
    ):
        if value:
            digest = hashlib.sha256(value.encode()).hexdigest()[:32]  # any username fits in a key
            counters.append((f"signin-failures:{kind}:{digest}:{window}", limit))
    return counters


def signin_wait_seconds(*, username: str, ip: str) -> int:
    """0 when this sign-in may be tried; else how many seconds until it may."""
    counters = _counters(username=username, ip=ip)
    try:
        counts = cache.get_many([key for key, _ in counters])
    except Exception as exc:
        # The counts live in Redis. With Redis away, people must still be able to sign in and
        # see what is going on (runs, approvals and decisions live in the database): the check
        # is skipped, loudly, rather than every sign-in failing.
        log.error("sign-in throttle unavailable, sign-in allowed unthrottled: %s", exc)
        return 0
    if all(counts.get(key, 0) < limit for key, limit in counters):
        return 0
    window = settings.SIGNIN_WINDOW_SECONDS
    return max(1, int(window - _now() % window))


def signin_failed(*, username: str, ip: str) -> None:
    try:
        _count_failure(username=username, ip=ip)
    except Exception as exc:  # Redis away: see signin_wait_seconds
        log.error("sign-in throttle unavailable, failure not counted: %s", exc)


def _count_failure(*, username: str, ip: str) -> None:
    for key, _ in _counters(username=username, ip=ip):
        # add() then incr(): both atomic in Redis, so parallel guesses are all counted.
        cache.add(key, 0, timeout=settings.SIGNIN_WINDOW_SECONDS + 60)
        try:
            cache.incr(key)
        except ValueError:  # expired between the two calls: this failure starts a new count
            cache.add(key, 1, timeout=settings.SIGNIN_WINDOW_SECONDS + 60)


def refusal_message(wait_seconds: int) -> str:
    minutes = max(1, round(wait_seconds / 60))
    return (
        f"Too many failed sign-in attempts for this account or from this address. "
        f"Try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )
