"""Tools."""
from runs.roles import PERM_ADD_TOOL, PERM_DELETE_TOOL, PERM_MANAGE_TOOLS, PERM_VIEW_TOOL
from runs.web.api import serializers as api
from runs.web.api.views.base import CrudViewSet, _crud_schema
from toolsapp.models import Tool


@_crud_schema("Tool", api.ToolSerializer)
class ToolViewSet(CrudViewSet):
    queryset = Tool.objects.select_related("mcp_server").order_by("name")
    serializer_class = api.ToolSerializer
    view_perm, manage_perm, add_perm, delete_perm = PERM_VIEW_TOOL, PERM_MANAGE_TOOLS, PERM_ADD_TOOL, PERM_DELETE_TOOL
