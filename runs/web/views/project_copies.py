"""Copying an agent or a tool into a project from another project the person belongs to: the
page lists what they may copy, and each copy is made by the agents' or the tools' own services
(runs/lifecycle/agent_copies.py, toolsapp/tool_copies.py). Only the project's admins (and site
administrators) copy into it; a thing of a project the person does not see is not found."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse

from projects import access
from projects.people import project_managed
from projects.views import posted_id
from runs.lifecycle.agent_copies import agent_copy
from runs.models import Agent
from runs.roles import PERM_ADD_AGENT, PERM_ADD_TOOL
from toolsapp.models import Tool
from toolsapp.tool_copies import CopyRefused, tool_copy

KINDS = {"agent": (Agent, PERM_ADD_AGENT), "tool": (Tool, PERM_ADD_TOOL)}


def copyable(user, into) -> dict[str, list]:
    """The agents and tools of the person's other projects (not the site's shared tools, which
    every project has, nor an MCP server's, which come with their server), by project and name."""
    agents = access.scoped(Agent.objects.exclude(project=into), user)
    tools = access.scoped(Tool.objects.exclude(project=into).exclude(project=None).exclude(kind=Tool.Kind.MCP), user)
    return {"agents": list(agents.select_related("project").order_by("project__name", "name")),
            "tools": list(tools.select_related("project").order_by("project__name", "name"))}


@login_required
def project_copy(request):
    """GET ?into=<project>: what may be copied into it; POST (kind, id, into): the copy."""
    into = project_managed(request.user, (request.POST if request.method == "POST" else request.GET).get("into", ""))
    here = f"{reverse('project_copy')}?into={into.slug}"
    if request.method == "POST":
        kind = request.POST.get("kind", "")
        if kind not in KINDS:
            raise Http404("No such thing to copy.")
        model, perm = KINDS[kind]
        if not access.may(request.user, perm, into.pk):
            raise PermissionDenied(f"Your role in {into} does not allow adding {kind}s.")
        source = model.objects.filter(pk=posted_id(request, "id")).first()
        if source is None or source.project_id is None or not access.may_see(request.user, source.project_id):
            raise Http404(f"No such {kind}.")  # another team's: as if it did not exist
        try:
            if kind == "agent":
                copied = agent_copy(agent=source, into=into, user=request.user)
                text = f"{copied.agent.name} is now an agent of {into}, a copy of {source.name}."
                if copied.tools_left:
                    text += (f" It has none of {source.project}'s tools it used ({', '.join(copied.tools_left)}): "
                             "copy them below, then add them to the agent.")
            else:
                made = tool_copy(tool=source, into=into)
                text = f"{made.name} is now a tool of {into}, a copy of {source.name}."
        except CopyRefused as refused:
            messages.error(request, str(refused))
        else:
            messages.success(request, text)
        return redirect(here)
    return render(request, "projects/project_copy.html", {"into": into, **copyable(request.user, into)})
