"""What every API view shares: authentication, the dashboard's permissions, JSON errors, and the
CRUD viewsets' permissions and schema."""
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.views import APIView

from accounts.auth import ApiTokenAuthentication
from projects.access import scoped
from runs.web.api.errors import exception_handler
from runs.web.api.permissions import RolePermissions
from runs.web.api.schema import errors
from runs.web.api.strict import unknown_fields_error


class ApiMixin:
    # Token first: an anonymous request then gets 401 with "WWW-Authenticate: Token" (the first
    # class names the challenge); a session still works, with its CSRF check on writes.
    authentication_classes = [ApiTokenAuthentication, SessionAuthentication]
    permission_classes = [RolePermissions]
    required_perms: dict[str, tuple[str, ...]] = {}
    # A write that takes no fields (cancel, pause, revoke...): any field sent is unknown, a 400
    # naming it (runs/web/api/strict.py), checked once the caller is known to be allowed.
    takes_no_body = False

    def get_exception_handler(self):
        return exception_handler

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if self.takes_no_body and request.method in ("POST", "PUT", "PATCH"):
            error = unknown_fields_error(request.data, ())
            if error is not None:
                raise error


class ApiView(ApiMixin, APIView):
    pass


def form_or_400(form) -> dict:
    """The dashboard form's cleaned data, or a 400 with its messages by field."""
    if not form.is_valid():
        raise ValidationError({name: [e["message"] for e in errs] for name, errs in form.errors.get_json_data().items()})
    return form.cleaned_data


def _crud_schema(name: str, serializer):
    return extend_schema_view(
        list=extend_schema(summary=f"{name}s", responses={200: serializer(many=True), **errors(404)}),
        retrieve=extend_schema(summary=f"One {name.lower()}", responses={200: serializer, **errors(404)}),
        create=extend_schema(summary=f"Create a {name.lower()} (admins)", responses={201: serializer, **errors(400)}),
        update=extend_schema(summary=f"Replace a {name.lower()} (admins)", responses={200: serializer, **errors(400, 404)}),
        partial_update=extend_schema(summary=f"Change a {name.lower()} (admins)",
                                     responses={200: serializer, **errors(400, 404)}),
        destroy=extend_schema(summary=f"Delete a {name.lower()} (admins)", responses={204: None, **errors(404, 409)}),
    )


class CrudViewSet(ApiMixin, viewsets.ModelViewSet):
    view_perm = manage_perm = add_perm = delete_perm = ""

    def get_queryset(self):
        """The rows of the projects the caller sees (and the site's shared ones, for a model
        whose project may be empty): one of another project is not found."""
        rows = super().get_queryset()
        field = rows.model._meta.get_field("project")
        return scoped(rows, self.request.user, shared=field.null)

    @property
    def required_perms(self):
        return {
            "GET": (self.view_perm,),
            "POST": (self.add_perm, self.manage_perm),  # the dashboard's create needs both too
            "PUT": (self.manage_perm,),
            "PATCH": (self.manage_perm,),
            "DELETE": (self.delete_perm,),
        }
