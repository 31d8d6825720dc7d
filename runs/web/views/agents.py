import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render

from runs.lifecycle.run_list import agent_recent_runs
from runs.models import Agent
from runs.roles import PERM_ADD_AGENT, PERM_MANAGE_AGENTS, PERM_VIEW_AGENT
from runs.web.forms.filters import AgentForm


@login_required
@permission_required(PERM_VIEW_AGENT, raise_exception=True)
def agent_list(request):
    agents = Agent.objects.annotate(tool_count=Count("tools")).order_by("name")
    return render(request, "runs/agent_list.html", {"agents": agents})


@login_required
@permission_required(PERM_VIEW_AGENT, raise_exception=True)
def agent_detail(request, pk: int):
    agent = get_object_or_404(Agent.objects.prefetch_related("tools"), pk=pk)
    return render(request, "runs/agent_detail.html", {
        "agent": agent,
        "provider_options_json": json.dumps(agent.provider_options, indent=2, ensure_ascii=False),
        "recent_runs": agent_recent_runs(agent=agent),
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
    form = AgentForm(request.POST if request.method == "POST" else None, instance=agent)
    if request.method == "POST" and form.is_valid():
        agent = form.save()
        messages.success(request, f"Agent {agent.name} saved.")
        return redirect("agent_detail", pk=agent.pk)
    return render(request, "runs/agent_form.html", {"form": form, "agent": agent})
