"""Who holds a permission in a project: the names the pages give when they say who may do something
("an admin of Billing: alice or bob may raise it"), and the count behind "no one can approve this".

A person holds `perm` in a project through a role there, or everywhere: a site role group, the
permission given to the account, or being a superuser (as projects/access.py reads them)."""
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import IntegerField, Q, Value

from projects.models import Membership

EVERYWHERE = -1  # a site-wide holder's "project" in the rows read below


def holders(perm: str, project_ids: set[int]) -> dict[int, dict[int, str]]:
    """{project id: {user id: username} of the active people who hold `perm` there} for each of
    `project_ids`, in one query (the site-wide holders are in every project's)."""
    if not project_ids:
        return {}
    app, codename = perm.split(".", 1)
    granting = Permission.objects.filter(content_type__app_label=app, codename=codename)
    site = (get_user_model().objects.filter(is_active=True)
            .filter(Q(is_superuser=True) | Q(user_permissions__in=granting) | Q(groups__permissions__in=granting))
            .annotate(where=Value(EVERYWHERE, output_field=IntegerField())).order_by()
            .values_list("pk", "username", "where"))
    members = (Membership.objects.filter(project_id__in=project_ids, role__permissions__in=granting, user__is_active=True)
               .order_by().values_list("user_id", "user__username", "project_id"))
    everywhere: dict[int, str] = {}
    found: dict[int, dict[int, str]] = {pk: {} for pk in project_ids}
    for user_id, username, where in site.union(members, all=True):
        if where == EVERYWHERE:
            everywhere[user_id] = username
        elif where in found:
            found[where][user_id] = username
    return {pk: {**people, **everywhere} for pk, people in found.items()}


def holders_of(perm: str, project_id: int) -> list[str]:
    """The usernames of the people who hold `perm` in one project, by name."""
    return sorted(holders(perm, {project_id})[project_id].values())


def names_text(names: list[str], *, most: int = 4) -> str:
    """"alice", "alice or bob", "alice, bob, carol or 3 others": whom to ask, in a sentence."""
    if len(names) > most:
        shown, rest = names[: most - 1], len(names) - most + 1
        return f"{', '.join(shown)} or {rest} others"
    if len(names) > 1:
        return f"{', '.join(names[:-1])} or {names[-1]}"
    return names[0] if names else ""
