import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render

from runs.roles import PERM_ADD_TOOL, PERM_MANAGE_TOOLS, PERM_VIEW_TOOL
from toolsapp.forms import ToolForm
from toolsapp.models import Tool
from toolsapp.services import ToolInvalid, tool_notices, tool_save


@login_required
@permission_required(PERM_VIEW_TOOL, raise_exception=True)
def tool_list(request):
    tools = Tool.objects.annotate(agent_count=Count("agents")).order_by("name")
    return render(request, "toolsapp/tool_list.html", {"tools": tools})


@login_required
@permission_required(PERM_VIEW_TOOL, raise_exception=True)
def tool_detail(request, pk: int):
    tool = get_object_or_404(Tool.objects.prefetch_related("agents"), pk=pk)
    schema = json.dumps(tool.parameters, indent=2, ensure_ascii=False)
    # What each approval flag does, in the words of the form's help text.
    flag_help = {name: Tool._meta.get_field(name).help_text for name in ("always_ask", "critical", "allow_argument_edits")}
    return render(request, "toolsapp/tool_detail.html", {"tool": tool, "schema_json": schema, "flag_help": flag_help})


@login_required
@permission_required((PERM_ADD_TOOL, PERM_MANAGE_TOOLS), raise_exception=True)
def tool_create(request):
    return _tool_form(request, Tool())


@login_required
@permission_required(PERM_MANAGE_TOOLS, raise_exception=True)
def tool_edit(request, pk: int):
    return _tool_form(request, get_object_or_404(Tool, pk=pk))


def _tool_form(request, tool: Tool):
    form = ToolForm(request.POST if request.method == "POST" else None, instance=tool)
    if request.method == "POST" and form.is_valid():
        try:
            tool = tool_save(tool=form.instance, data=form.cleaned_data)
        except ToolInvalid as exc:  # changed by someone else since the form was checked
            form.add_tool_errors(exc)
        else:
            messages.success(request, f"Tool {tool.name} saved.")
            for notice in tool_notices(tool=tool):
                # Worth fixing, but the tool works as saved: shown, never blocking.
                messages.warning(request, notice)
            return redirect("tool_detail", pk=tool.pk)
    return render(request, "toolsapp/tool_form.html", {"form": form, "tool": tool})
