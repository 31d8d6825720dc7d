import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.db.models import Count
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from projects.access import scoped
from runs.lifecycle.agent_versions import (
    VersionNotFound,
    agent_version,
    agent_versions,
    next_number,
    version_differences,
)
from runs.lifecycle.agents import InvalidAgent, version_make_current
from runs.lifecycle.run_list import agent_recent_runs
from runs.models import Agent
from runs.roles import PERM_ADD_AGENT, PERM_MANAGE_AGENTS, PERM_VIEW_AGENT
from runs.web.forms.agents import AgentForm


@login_required
@permission_required(PERM_VIEW_AGENT, raise_exception=True)
def agent_list(request):
    agents = scoped(Agent.objects.select_related("project"), request.user).annotate(tool_count=Count("tools")).order_by("name")
    return render(request, "runs/agent_list.html", {"agents": agents})


@login_required
@permission_required(PERM_VIEW_AGENT, raise_exception=True)
def agent_detail(request, pk: int):
    agent = get_object_or_404(Agent.objects.prefetch_related("tools"), pk=pk)
    return render(request, "runs/agent_detail.html", {
        "agent": agent,
        "provider_options_json": json.dumps(agent.provider_options, indent=2, ensure_ascii=False),
        "recent_runs": agent_recent_runs(agent=agent),
        # Its tools the person sees: one left in another project (the agent moved) is not named.
        "tools": scoped(agent.tools.all(), request.user, shared=True),
    })


@login_required
@permission_required((PERM_ADD_AGENT, PERM_MANAGE_AGENTS), raise_exception=True)
def agent_create(request):
    return _agent_form(request, Agent())


@login_required
@permission_required(PERM_MANAGE_AGENTS, raise_exception=True)
def agent_edit(request, pk: int):
    return _agent_form(request, get_object_or_404(Agent, pk=pk))


def _agent_form(request, agent: Agent):
    form = AgentForm(request.POST if request.method == "POST" else None, instance=agent, user=request.user)
    if request.method == "POST" and form.is_valid():
        if "draft" in request.POST and agent.pk is not None:
            draft = form.save_draft(user=request.user)
            messages.success(request, f"Draft version {draft.number} of {agent.name} saved; its runs still use "
                                      f"version {agent.version} until the draft is made current.")
            return redirect("agent_versions", pk=agent.pk)
        agent = form.save(user=request.user)
        messages.success(request, f"Agent {agent.name} saved as version {agent.version}.")
        return redirect("agent_detail", pk=agent.pk)
    return render(request, "runs/agent_form.html", {
        "form": form, "agent": agent, "next_version": next_number(agent) if agent.pk else 1,
    })


@login_required
@permission_required(PERM_VIEW_AGENT, raise_exception=True)
def agent_version_list(request, pk: int):
    agent = get_object_or_404(Agent, pk=pk)
    versions = agent_versions(agent=agent)
    return render(request, "runs/agent_versions.html", {"agent": agent, "versions": versions})


@login_required
@permission_required(PERM_VIEW_AGENT, raise_exception=True)
def agent_version_compare(request, pk: int):
    agent = get_object_or_404(Agent, pk=pk)
    try:
        before = agent_version(agent=agent, number=int(request.GET.get("a", "")))
        after = agent_version(agent=agent, number=int(request.GET.get("b", agent.version)))
    except (ValueError, VersionNotFound) as exc:
        raise Http404("No such version of this agent.") from exc
    return render(request, "runs/agent_version_compare.html", {
        "agent": agent, "before": before, "after": after, "differences": version_differences(before, after),
    })


@login_required
@permission_required(PERM_MANAGE_AGENTS, raise_exception=True)
@require_POST
def agent_version_make_current(request, pk: int, number: int):
    agent = get_object_or_404(Agent, pk=pk)
    try:
        version = version_make_current(agent=agent, number=number, user=request.user)
    except VersionNotFound as exc:
        raise Http404(str(exc)) from exc
    except InvalidAgent as exc:
        messages.error(request, f"Version {number} cannot be made current: {exc}")
        return redirect("agent_versions", pk=agent.pk)
    source = agent_version(agent=agent, number=number)
    what = f"Draft version {number} is now current" if source.draft else f"Version {number} is current again"
    # The tools a version names that are gone since are left out: say so where the person looks.
    dropped = f" ({version.note.split('(', 1)[1]}" if "(" in version.note else ""
    messages.success(request, f"{what}, as version {version.number}.{dropped}")
    return redirect("agent_versions", pk=agent.pk)
