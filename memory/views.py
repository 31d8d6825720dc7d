"""An agent's memories: the list with its search (everyone who sees agents' memories), and a
fact's correction and deletion (admins)."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from memory import limits
from memory.forms import MemoryEditForm, MemorySearchForm
from memory.models import Memory
from memory.selectors import READERS_SHOWN, agent_customers, agent_memories, memory_page, memory_tools
from memory.services import memory_delete, memory_update
from runs.models import Agent
from runs.roles import PERM_CHANGE_MEMORY, PERM_DELETE_MEMORY, PERM_VIEW_AGENT, PERM_VIEW_MEMORY


@login_required
@permission_required((PERM_VIEW_MEMORY, PERM_VIEW_AGENT), raise_exception=True)
@require_GET
def memory_list(request, agent_id: int):
    agent = get_object_or_404(Agent, pk=agent_id)
    form = MemorySearchForm(request.GET or None, customers=agent_customers(agent=agent))
    valid = form.is_valid()
    query = form.cleaned_data.get("q", "") if valid else ""
    run = form.cleaned_data.get("run") if valid else None
    memories = agent_memories(agent=agent, query=query, customer=form.scope() if valid else None, run=run)
    page, rows = memory_page(memories=memories, number=request.GET.get("page"))
    return render(request, "memory/memory_list.html", {
        "agent": agent, "form": form, "query": query, "page": page, "rows": rows, "readers_shown": READERS_SHOWN,
        "searched": bool(query.strip()) or bool(valid and form.cleaned_data.get("customer")) or run is not None,
        "run": run,
        "tools": memory_tools(agent=agent),
        "max_facts": limits.max_facts(),
    })


@login_required
@permission_required(PERM_CHANGE_MEMORY, raise_exception=True)
def memory_edit(request, agent_id: int, pk: int):
    memory = get_object_or_404(Memory.objects.select_related("agent"), pk=pk, agent_id=agent_id)
    form = MemoryEditForm(request.POST if request.method == "POST" else None, initial={"text": memory.text})
    if request.method == "POST" and form.is_valid():
        try:
            memory_update(memory=memory, text=form.cleaned_data["text"], user=request.user)
        except ValidationError as invalid:
            form.add_error("text", invalid)
        else:
            messages.success(request, f"Fact #{memory.pk} saved.")
            return redirect("agent_memories", agent_id=agent_id)
    return render(request, "memory/memory_edit.html", {"memory": memory, "agent": memory.agent, "form": form})


@login_required
@permission_required(PERM_DELETE_MEMORY, raise_exception=True)
def memory_delete_view(request, agent_id: int, pk: int):
    memory = get_object_or_404(Memory.objects.select_related("agent"), pk=pk, agent_id=agent_id)
    if request.method == "POST":
        memory_delete(memory=memory)
        messages.success(request, f"Fact #{pk} deleted: later runs no longer find it.")
        return redirect("agent_memories", agent_id=agent_id)
    return render(request, "memory/memory_confirm_delete.html", {"memory": memory, "agent": memory.agent})
