from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from projects import access
from runs.roles import PERM_MANAGE_TOOLS, PERM_VIEW_TOOL
from toolsapp.mcp.forms import McpServerForm
from toolsapp.mcp.services import deletion_summary, mcp_server_delete, mcp_server_save
from toolsapp.models import McpServer


def servers_seen(user):
    """The servers the site shares and those of the projects the person sees."""
    return access.scoped(McpServer.objects.select_related("project"), user, shared=True)


def _server(request, pk: int) -> McpServer:
    """The server, one the person may change: the route's scope says so already
    (projects/routes.py); said again where it is changed, since a server's page shows its
    command or URL. A shared server is changed by site-wide admins only."""
    server = get_object_or_404(servers_seen(request.user), pk=pk)
    if not access.may(request.user, PERM_MANAGE_TOOLS, server.project_id):
        raise PermissionDenied("Only an admin of every project may change an MCP server shared by the site."
                               if server.project_id is None else "Your role in this server's project does not allow it.")
    return server


@login_required
@permission_required(PERM_VIEW_TOOL, raise_exception=True)
def mcp_server_list(request):
    servers = list(servers_seen(request.user).order_by("name"))
    for server in servers:
        server.may_change = access.may(request.user, PERM_MANAGE_TOOLS, server.project_id)
    return render(request, "toolsapp/mcp_server_list.html", {"servers": servers})


@login_required
@permission_required(PERM_MANAGE_TOOLS, raise_exception=True)
def mcp_server_detail(request, pk: int):
    server = _server(request, pk)
    tools = server.tools.order_by("name")
    return render(request, "toolsapp/mcp_server_detail.html", {"server": server, "tools": tools})


@login_required
@permission_required(PERM_MANAGE_TOOLS, raise_exception=True)
def mcp_server_create(request):
    return _server_form(request, McpServer())


@login_required
@permission_required(PERM_MANAGE_TOOLS, raise_exception=True)
def mcp_server_edit(request, pk: int):
    return _server_form(request, _server(request, pk))


@login_required
@permission_required(PERM_MANAGE_TOOLS, raise_exception=True)
@require_POST
def mcp_server_discover_view(request, pk: int):
    from toolsapp.mcp.discovery import mcp_server_discover  # the MCP SDK, only when asked: see executors.mcp

    result = mcp_server_discover(server=_server(request, pk))
    if not result.ok:
        messages.error(request, result.summary())
        return redirect("mcp_server_detail", pk=pk)
    messages.success(request, result.summary())
    for label, names in (("Added", result.added), ("Updated", result.updated), ("Disabled", result.disabled)):
        if names:
            messages.info(request, f"{label}: {', '.join(names)}")
    for remote_name, reason in result.refused:
        messages.warning(request, f"Refused {remote_name}: {reason}")
    return redirect("mcp_server_detail", pk=pk)


@login_required
@permission_required(PERM_MANAGE_TOOLS, raise_exception=True)
def mcp_server_delete_view(request, pk: int):
    server = _server(request, pk)
    if request.method == "POST":
        messages.success(request, deletion_summary(server.name, mcp_server_delete(server=server)))
        return redirect("mcp_server_list")
    tools = server.tools.filter(enabled=True).order_by("name")
    return render(request, "toolsapp/mcp_server_confirm_delete.html", {"server": server, "tools": tools})


def _server_form(request, server: McpServer):
    form = McpServerForm(request.POST if request.method == "POST" else None, instance=server, user=request.user)
    if request.method == "POST" and form.is_valid():
        server = mcp_server_save(server=form.save(commit=False), user=request.user)
        messages.success(request, f"MCP server {server.name} saved. Discover its tools to use them.")
        return redirect("mcp_server_detail", pk=server.pk)
    return render(request, "toolsapp/mcp_server_form.html", {"form": form, "server": server})
