"""What every API view shares: the per-method permissions (`required_perms`), a write that takes
no body, pages of rows, the dashboard forms' errors as a 400, and the CRUD viewsets' permissions
and schema. Authentication and the exception handler are the settings' (REST_FRAMEWORK)."""
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.permissions import RolePermissions
from apikit.schema import errors
from apikit.strict import unknown_fields_error
from projects.access import scoped


class ApiMixin:
    # Who the caller is: the settings' DEFAULT_AUTHENTICATION_CLASSES (an API token first, then
    # the session); what they may do: `required_perms`, per HTTP method (apikit/permissions.py).
    permission_classes = [RolePermissions]
    required_perms: dict[str, tuple[str, ...]] = {}
    # A write that takes no fields (cancel, pause, revoke...): any field sent is unknown, a 400
    # naming it (apikit/strict.py), checked once the caller is known to be allowed.
    takes_no_body = False

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if self.takes_no_body and request.method in ("POST", "PUT", "PATCH"):
            error = unknown_fields_error(request.data, ())
            if error is not None:
                raise error


class ApiView(ApiMixin, APIView):
    pass


class ApiListView(ApiMixin, generics.GenericAPIView):
    """A view whose GET is a page of rows (DRF's page numbers, like the agents and tools)."""

    def page(self, queryset, serializer_class) -> Response:
        return self.get_paginated_response(serializer_class(self.paginate_queryset(queryset), many=True).data)


def form_or_400(form) -> dict:
    """The dashboard form's cleaned data, or a 400 with its messages by field."""
    if not form.is_valid():
        raise ValidationError({name: [e["message"] for e in errs] for name, errs in form.errors.get_json_data().items()})
    return form.cleaned_data


def crud_schema(name: str, serializer):
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
