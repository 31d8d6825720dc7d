import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect, render

from projects import access
from runs.models import Agent
from runs.roles import PERM_ADD_TOOL, PERM_MANAGE_TOOLS, PERM_VIEW_TOOL
from toolsapp.executors import kind_of, reaches_outside
from toolsapp.forms import ToolForm, tool_save_in_project
from toolsapp.models import Tool
from toolsapp.services import ToolInvalid, tool_notices


def tools_seen(user):
    """The tools the site shares and those of the projects the person sees."""
    return access.scoped(Tool.objects.select_related("project"), user, shared=True)


def _agents_seen(user) -> Q:
    """The agents (of a tool, through "agents") the person sees: a shared tool's agents of other
    teams are not counted nor named."""
    visible = access.visible_projects(user)
    return Q() if visible is None else Q(agents__project__in=visible)


@login_required
@permission_required(PERM_VIEW_TOOL, raise_exception=True)
def tool_list(request):
    tools = tools_seen(request.user).annotate(
        agent_count=Count("agents", filter=_agents_seen(request.user), distinct=True)).order_by("name")
    return render(request, "toolsapp/tool_list.html", {"tools": tools})


@login_required
@permission_required(PERM_VIEW_TOOL, raise_exception=True)
def tool_detail(request, pk: int):
    tool = get_object_or_404(tools_seen(request.user).select_related("mcp_server"), pk=pk)
    schema = json.dumps(tool.parameters, indent=2, ensure_ascii=False)
    # What each approval flag does, in the words of the form's help text.
    flag_help = {name: Tool._meta.get_field(name).help_text for name in ("always_ask", "critical", "allow_argument_edits")}
    agents = access.scoped(Agent.objects.filter(tools=tool), request.user).order_by("name")
    server = tool.mcp_server
    kind = kind_of(tool.kind)  # its rows as its kind declares them (none: the handler's, as a Python tool)
    config = tool.config or {}
    return render(request, "toolsapp/tool_detail.html", {
        "tool": tool, "schema_json": schema, "flag_help": flag_help, "agents": agents,
        "kind_rows": kind.detail_template if kind else "toolsapp/kinds/_handler.html",
        "settings": [(s.label, config.get(s.name, "")) for s in kind.config_fields] if kind else [],
        "reaches_outside": reaches_outside(tool.kind),
        # The server's page is for those who may change it (its command or URL shows there).
        "server_link": server is not None and access.may(request.user, PERM_MANAGE_TOOLS, server.project_id),
    })


@login_required
@permission_required((PERM_ADD_TOOL, PERM_MANAGE_TOOLS), raise_exception=True)
def tool_create(request):
    return _tool_form(request, Tool())


@login_required
@permission_required(PERM_MANAGE_TOOLS, raise_exception=True)
def tool_edit(request, pk: int):
    tool = get_object_or_404(tools_seen(request.user), pk=pk)
    # The route's scope says so already (projects/routes.py); said again where the tool is
    # changed: a shared tool by site-wide admins only, a project's by that project's.
    if not access.may(request.user, PERM_MANAGE_TOOLS, tool.project_id):
        raise PermissionDenied("Only an admin of every project may change a tool shared by the site."
                               if tool.project_id is None else "Your role in this tool's project does not allow it.")
    return _tool_form(request, tool)


def _tool_form(request, tool: Tool):
    form = ToolForm(request.POST if request.method == "POST" else None, instance=tool, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            tool = tool_save_in_project(tool=form.instance, data=form.cleaned_data,
                                        project=form.cleaned_data["project"])
        except ToolInvalid as exc:  # changed by someone else since the form was checked
            form.add_tool_errors(exc)
        else:
            messages.success(request, f"Tool {tool.name} saved.")
            for notice in tool_notices(tool=tool):
                # Worth fixing, but the tool works as saved: shown, never blocking.
                messages.warning(request, notice)
            return redirect("tool_detail", pk=tool.pk)
    return render(request, "toolsapp/tool_form.html", {"form": form, "tool": tool})
