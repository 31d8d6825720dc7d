"""The projects page: the projects a person sees, their role in each, and who else works there."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from projects import access
from projects.models import Membership, Project

# The site's role groups (runs/roles.py) as a person is named by them: "an operator".
ROLE_NAMES = {"viewers": "viewer", "operators": "operator", "admins": "admin"}


def role_name(group: str) -> str:
    return ROLE_NAMES.get(group, group)


@login_required
def project_list(request):
    user = request.user
    visible = access.visible_projects(user)
    projects = Project.objects.order_by("name")
    if visible is not None:
        projects = projects.filter(pk__in=visible)
    projects = list(projects)
    members: dict[int, list[Membership]] = {}
    for membership in Membership.objects.filter(project__in=projects).select_related("user", "role"):
        members.setdefault(membership.project_id, []).append(membership)
    mine = {m.project_id: role_name(m.role.name) for ms in members.values() for m in ms if m.user_id == user.pk}
    site_roles = sorted(role_name(name) for name in user.groups.filter(name__in=ROLE_NAMES).values_list("name", flat=True))
    site = ", ".join(site_roles) + " (site role)" if site_roles else "superuser" if user.is_superuser else ""
    rows = [{"project": p, "members": [(m.user.get_username(), role_name(m.role.name)) for m in members.get(p.pk, [])],
             "role": mine.get(p.pk) or site}
            for p in projects]
    return render(request, "projects/project_list.html", {"rows": rows, "site_roles": site_roles})
