"""The dashboard's permissions, per HTTP method of each API view (see runs.roles)."""
from rest_framework.permissions import BasePermission

READ_METHODS = ("GET", "HEAD", "OPTIONS")


class RolePermissions(BasePermission):
    """The view's `required_perms` maps an HTTP method to the permissions it needs, e.g.
    {"GET": (PERM_VIEW,), "POST": (PERM_LAUNCH,)}; HEAD and OPTIONS need what GET needs."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        method = "GET" if request.method in READ_METHODS else request.method
        perms = view.required_perms.get(method)
        # A method the view does not list is refused here; the view answers 405 for it anyway.
        return perms is not None and user.has_perms(perms)
