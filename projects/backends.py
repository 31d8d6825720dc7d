"""Django's permission checks, per project: `user.has_perm(perm)` answers with the person's role
in the project the request is about (set by the route's scope, projects/routes.py), or, where a
request is about no one project (a list, a launch form), with any of their roles; the lists and
forms are cut to the right projects (projects/access.py). `user.has_perm(perm, project)` asks
about one project. Site roles are Django's ModelBackend, which stays before this one."""
from django.contrib.auth.backends import ModelBackend

from projects import access
from projects.models import Project

SHARED = 0  # the scope of a thing the site shares: seen by every member, changed by site roles


class ProjectRoleBackend(ModelBackend):
    """First of AUTHENTICATION_BACKENDS: it signs nobody in (passwords and single sign-on are the
    backends after it), but finds a signed-in person again (Django's test client and sessions may
    name the first backend) and answers for their permissions per project."""

    def authenticate(self, request, **credentials):
        return None

    def get_all_permissions(self, user_obj, obj=None):
        if not user_obj.is_active or user_obj.is_anonymous:
            return set()
        perms = access.project_perms(user_obj)
        if obj is not None:
            project_id = obj.pk if isinstance(obj, Project) else getattr(obj, "project_id", None)
            if project_id is None:
                return set()
            return set(perms.get(project_id, ())) | access.site_perms(user_obj)
        scope = getattr(user_obj, "project_scope", None)
        if scope == SHARED:
            return {p for p in set().union(*perms.values()) if p.split(".", 1)[1].startswith("view_")}
        if scope is not None:
            return set(perms.get(scope, ()))
        return set().union(*perms.values())

    def has_perm(self, user_obj, perm, obj=None):
        return perm in self.get_all_permissions(user_obj, obj)

    def has_module_perms(self, user_obj, app_label):
        return any(perm.split(".", 1)[0] == app_label for perm in self.get_all_permissions(user_obj))
