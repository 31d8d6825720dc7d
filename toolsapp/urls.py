from django.urls import path

from toolsapp import views
from toolsapp.mcp import views as mcp_views

urlpatterns = [
    path("", views.tool_list, name="tool_list"),
    path("new/", views.tool_create, name="tool_create"),
    path("<int:pk>/", views.tool_detail, name="tool_detail"),
    path("<int:pk>/edit/", views.tool_edit, name="tool_edit"),
    path("mcp/", mcp_views.mcp_server_list, name="mcp_server_list"),
    path("mcp/new/", mcp_views.mcp_server_create, name="mcp_server_create"),
    path("mcp/<int:pk>/", mcp_views.mcp_server_detail, name="mcp_server_detail"),
    path("mcp/<int:pk>/edit/", mcp_views.mcp_server_edit, name="mcp_server_edit"),
    path("mcp/<int:pk>/delete/", mcp_views.mcp_server_delete_view, name="mcp_server_delete"),
    path("mcp/<int:pk>/discover/", mcp_views.mcp_server_discover_view, name="mcp_server_discover"),
]
