"""API tokens: the one place that makes, hashes, checks and revokes them.

A key is 32 random bytes, so one SHA-256 is enough to store it: there is nothing to guess that a
slow hash would protect (unlike a password). The key's first characters stay readable as its
prefix, so a person can tell their tokens apart.
"""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from accounts.models import ApiToken
from audit.models import AuditEntry
from audit.record import entry_write
from projects.access import may_see, visible_projects
from projects.models import Project

KEY_START = "ags_"
PREFIX_LENGTH = len(KEY_START) + 8
# last_used_at is written at most this often per token: a script polling every second must not
# turn every read into a database write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenRefused(Exception):
    """Why a key does not open the API, in a sentence for the client."""


def token_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def token_expiry(*, days: int | None, now=None):
    """When a token made now expires: `days` from now, or API_TOKEN_DAYS; 0 days means never."""
    days = settings.API_TOKEN_DAYS if days is None else days
    return None if days == 0 else (now or timezone.now()) + timedelta(days=days)


def token_days_refusal(days: int) -> str:
    """Why a token may not live `days` days ("" when it may): never past API_TOKEN_DAYS, the
    operator's limit (the page's form and the API's serializer both ask here)."""
    if days < 1:
        return "At least 1 day."
    if settings.API_TOKEN_DAYS and days > settings.API_TOKEN_DAYS:
        return f"At most {settings.API_TOKEN_DAYS} days."
    return ""


def token_projects(user):
    """The projects a person may limit a token to: those they see (a token sees no more than its
    person does)."""
    projects = Project.objects.order_by("name")
    visible = visible_projects(user)
    return projects if visible is None else projects.filter(pk__in=visible)


def token_project_allowed(user, project) -> bool:
    return project is None or may_see(user, project.pk)


def api_token_create(*, user, name: str = "", days: int | None = None, project=None) -> tuple[ApiToken, str]:
    """A new token and its plain key; the key is not kept anywhere, so show it now or never.
    With `project`, the token sees that project only (with its person's role there)."""
    key = KEY_START + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=key[:PREFIX_LENGTH],
        key_hash=token_hash(key),
        expires_at=token_expiry(days=days),
        project=project,
    )
    return token, key


def api_token_check(key: str) -> ApiToken:
    """The token this key belongs to, if it may still be used; else TokenRefused."""
    token = ApiToken.objects.select_related("user").filter(key_hash=token_hash(key)).first()
    now = timezone.now()
    if token is None or not token.user.is_active:
        raise TokenRefused("Invalid token.")
    if token.revoked_at is not None:
        raise TokenRefused("Token has been revoked.")
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRefused("Token has expired.")
    if token.last_used_at is None or token.last_used_at < now - LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def api_tokens_revoke(*, tokens) -> int:
    """Revoke the tokens of this queryset that are not revoked yet; how many were. Each is an
    audit entry (an UPDATE sends no signal the audit log would hear)."""
    now = timezone.now()
    revoking = list(tokens.filter(revoked_at=None).select_related("user"))
    count = tokens.filter(revoked_at=None, pk__in=[t.pk for t in revoking]).update(revoked_at=now)
    for token in revoking:
        entry_write(action=AuditEntry.Action.UPDATED, kind="api token", object_id=token.pk,
                    object_repr=f"{token} of {token.user.get_username()}",
                    before={"revoked_at": None}, after={"revoked_at": now.isoformat()})
    return count
