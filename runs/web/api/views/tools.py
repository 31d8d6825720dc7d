"""Tools: those the site shares and those of the projects the caller sees (CrudViewSet's queryset;
a route naming another team's tool answers 404: projects/routes.py)."""
from rest_framework.exceptions import PermissionDenied

from apikit.views import CrudViewSet, crud_schema
from projects import access
from runs.roles import PERM_ADD_TOOL, PERM_DELETE_TOOL, PERM_MANAGE_TOOLS, PERM_VIEW_TOOL
from runs.web.api import serializers as api
from toolsapp.models import Tool


@crud_schema("Tool", api.ToolSerializer)
class ToolViewSet(CrudViewSet):
    queryset = Tool.objects.select_related("mcp_server", "project").order_by("name")
    serializer_class = api.ToolSerializer
    view_perm, manage_perm, add_perm, delete_perm = PERM_VIEW_TOOL, PERM_MANAGE_TOOLS, PERM_ADD_TOOL, PERM_DELETE_TOOL

    # The route's scope allows these already (projects/routes.py); said again where the tool is
    # changed: a shared tool by admins of every project only, a project's by that project's.
    def perform_update(self, serializer):
        _may(self.request.user, self.manage_perm, serializer.instance)
        super().perform_update(serializer)

    def perform_destroy(self, instance):
        _may(self.request.user, self.delete_perm, instance)
        super().perform_destroy(instance)


def _may(user, perm: str, tool: Tool) -> None:
    if not access.may(user, perm, tool.project_id):
        raise PermissionDenied("Only an admin of every project may change a tool shared by the site."
                               if tool.project_id is None else "Your role in this tool's project does not allow it.")
