"""Signing in a person the identity provider vouched for: the one place that finds or creates
their user and sets their roles.

The provider is the source of truth for the role groups (viewers, operators, admins) of its
people: every sign-in sets them from that sign-in's claims, adding and removing, so a person
taken out of a provider group loses the role here at their next sign-in, and every permission
check from then on (pages, API, the checks an open websocket makes before each decision) sees
it. Other groups (the named groups approval rules ask) are left as an admin set them.

A person whose claims map to no role is refused, and their role groups are emptied first, so
their sessions still open elsewhere keep no rights either. A role in a project that does not exist
(the map names a slug nobody created, or one renamed since) is no role: such a group is refused
like a group the map does not name, and the mistake is logged for whoever deploys.
"""

import hashlib
import logging
import re
import unicodedata
from collections.abc import Mapping

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import SsoIdentity
from accounts.sso_config import ROLE_GROUPS
from accounts.sso_roles import roles_from_claims
from accounts.username_skeleton import username_skeleton
from projects.models import Membership, Project

log = logging.getLogger(__name__)
_WIDTH = ["admins", "operators", "viewers"]  # the widest first

NO_ROLE = (
    "You signed in at the identity provider, but none of your groups there gives a role here: ask an administrator."
)
DEACTIVATED = "Your account here is deactivated: ask an administrator."
NO_SUBJECT = "The identity provider did not say who you are (no sub claim)."


class SignInRefused(Exception):
    """Why this sign-in is refused, in a sentence for the person."""


def _claim_text(claims: Mapping, name: str) -> str:
    value = claims.get(name)
    return value.strip() if isinstance(value, str) else ""


def _subject_tag(subject: str) -> str:
    return hashlib.sha256(subject.encode()).hexdigest()[:12]


def _username_base(claims: Mapping, subject: str) -> str:
    for candidate in (_claim_text(claims, "preferred_username"), _claim_text(claims, "email").split("@")[0]):
        # NFKC as Django stores usernames, before the cut: "ａｄｍｉｎ" is "admin".
        cleaned = re.sub(r"[^\w.@+-]", "", unicodedata.normalize("NFKC", candidate))[:120]
        if cleaned:
            return cleaned
    return "sso-" + _subject_tag(subject)


def _free_username(claims: Mapping, subject: str, *, unique_suffix: bool = False) -> str:
    """The person's preferred username if no name here looks like it, else it with a number. Never
    an existing account's, nor one a person could take for it: a provider user called "admin", or
    "аdmin" with a Cyrillic а, does not become (or pass for) the local admin."""
    base = _username_base(claims, subject)
    if not unique_suffix:
        # Lookalikes cannot be found by a query: every name's skeleton, once per new person.
        taken = {username_skeleton(name) for name in get_user_model().objects.values_list("username", flat=True)}
        for n in range(1, 100):
            name = base if n == 1 else f"{base}-{n}"
            if username_skeleton(name) not in taken:
                return name
    return f"{base}-{_subject_tag(subject)}"


def _found(issuer: str, subject: str) -> SsoIdentity | None:
    return SsoIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()


def _identity(*, issuer: str, subject: str, claims: Mapping, found: SsoIdentity | None) -> SsoIdentity:
    """This subject's identity (`found`, when it was), created with a new user at their first sign-in."""
    for attempt in range(2):
        identity = found if attempt == 0 else _found(issuer, subject)
        if identity is not None:
            return identity
        try:
            with transaction.atomic():
                username = _free_username(claims, subject, unique_suffix=attempt > 0)
                user = get_user_model().objects.create_user(username)  # no usable password
                return SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
        except IntegrityError:
            # The same person's sign-in in another tab got there first (found above next time),
            # or another person took the free username meanwhile (the next try adds a suffix).
            continue
    raise SignInRefused("Your account could not be created just now: try again.")


def _roles_that_exist(roles: frozenset[str]) -> frozenset[str]:
    """The roles without those in a project that does not exist."""
    slugs = {role.partition("@")[2] for role in roles if "@" in role}
    if not slugs:
        return roles
    missing = slugs - set(Project.objects.filter(slug__in=slugs).values_list("slug", flat=True))
    for slug in sorted(missing):
        log.warning("single sign-on: OIDC_ROLE_MAP gives a role in project %r, which does not exist", slug)
    return frozenset(role for role in roles if role.partition("@")[2] not in missing)


def _set_role_groups(user, roles: frozenset[str], role_map: Mapping[str, str]) -> None:
    """The person's site roles (role groups) and project roles (memberships of the projects the
    map names) as the claims give them now; a person with several roles in one place keeps the
    widest. Memberships of projects the map does not name are an administrator's, and stay."""
    site = {ROLE_GROUPS[role] for role in roles if "@" not in role}
    groups = list(Group.objects.filter(name__in=ROLE_GROUPS.values()))
    user.groups.remove(*[group for group in groups if group.name not in site])
    user.groups.add(*[group for group in groups if group.name in site])
    by_name = {group.name: group for group in groups}
    wanted: dict[str, str] = {}
    for role in roles:
        base, _, slug = role.partition("@")
        if slug:
            group = ROLE_GROUPS[base]
            if slug not in wanted or _WIDTH.index(group) < _WIDTH.index(wanted[slug]):
                wanted[slug] = group
    mapped = {value.partition("@")[2] for value in role_map.values() if "@" in value}
    for project in Project.objects.filter(slug__in=mapped):
        if project.slug in wanted and wanted[project.slug] in by_name:
            Membership.objects.update_or_create(project=project, user=user,
                                                defaults={"role": by_name[wanted[project.slug]]})
        else:
            Membership.objects.filter(project=project, user=user).delete()


def sso_user_sign_in(*, issuer: str, claims: Mapping, claim: str, role_map: Mapping[str, str]):
    """The user these verified claims sign in, their role groups set from the claims; else
    SignInRefused. A first sign-in with a role creates the user (never one without a role)."""
    subject = _claim_text(claims, "sub")
    if not subject:
        raise SignInRefused(NO_SUBJECT)
    roles = _roles_that_exist(roles_from_claims(claims, claim=claim, role_map=role_map))
    found = _found(issuer, subject)
    if not roles and found is None:
        raise SignInRefused(NO_ROLE)
    with transaction.atomic():
        identity = _identity(issuer=issuer, subject=subject, claims=claims, found=found)
        user = identity.user
        _set_role_groups(user, roles, role_map)
        email = _claim_text(claims, "email")
        if email and user.email != email:
            user.email = email  # for display and notifications only: never used to match a person
            user.save(update_fields=["email"])
        identity.roles = sorted(roles)
        identity.last_sign_in_at = timezone.now()
        identity.save(update_fields=["roles", "last_sign_in_at"])
    if not roles:
        raise SignInRefused(NO_ROLE)
    if not user.is_active:
        raise SignInRefused(DEACTIVATED)
    return user
