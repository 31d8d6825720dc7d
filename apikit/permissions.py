"""The dashboard's permissions, per HTTP method of each API view (the apps' roles hold them, e.g.
runs.roles), and the projects the caller sees (projects/routes.py)."""
from django.http import Http404
from rest_framework.exceptions import NotFound
from rest_framework.permissions import BasePermission

from projects.access import token_limited
from projects.backends import SHARED
from projects.routes import scope_check

READ_METHODS = ("GET", "HEAD", "OPTIONS")


class RolePermissions(BasePermission):
    """The view's `required_perms` maps an HTTP method to the permissions it needs, e.g.
    {"GET": (PERM_VIEW,), "POST": (PERM_LAUNCH,)}; HEAD and OPTIONS need what GET needs."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        match = request.resolver_match
        try:
            # A thing of a project the caller does not see answers 404 (projects/routes.py).
            scope_check(user, match.url_name if match else None, view.kwargs)
        except Http404:
            raise NotFound() from None
        method = "GET" if request.method in READ_METHODS else request.method
        if method != "GET" and token_limited(user) and getattr(user, "project_scope", None) == SHARED:
            # A thing the site shares (a tool) is only read through a token limited to a project,
            # as by a member of it, though its person may change it (a site role, a superuser:
            # Django's checks give those every permission everywhere, the limit's project aside).
            return False
        perms = view.required_perms.get(method)
        # A method the view does not list is refused here; the view answers 405 for it anyway.
        return perms is not None and user.has_perms(perms)
