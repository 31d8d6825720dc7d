"""Reads for the launch form, the live run page and its websocket."""
from django.db.models import QuerySet

from projects.access import projects_with, scoped
from runs.engine.storage.events import event_at
from runs.lifecycle.launch_rules import launch_defaults
from runs.models import Agent, Run, RunEvent, ToolCall
from runs.roles import PERM_LAUNCH
from toolsapp.models import Tool

EVENT_BATCH = 500


def agents_for_launch(user=None) -> QuerySet[Agent]:
    """The agents `user` may launch: those of the projects where they launch runs."""
    agents = Agent.objects.order_by("name")
    allowed = projects_with(user, PERM_LAUNCH) if user is not None else None
    return agents if allowed is None else agents.filter(project_id__in=allowed)


def agent_defaults(*, agents) -> dict[str, dict]:
    """What a launch gets from each agent when nothing is overridden, keyed by agent pk."""
    tools_by_agent: dict[int, list[str]] = {}
    for agent_id, name in Agent.tools.through.objects.filter(agent__in=agents).values_list("agent_id", "tool__name"):
        tools_by_agent.setdefault(agent_id, []).append(name)
    return {str(agent.pk): launch_defaults(agent=agent, tools=tools_by_agent.get(agent.pk, [])) for agent in agents}


def enabled_tool_names(user=None) -> list[str]:
    """The enabled tools' names; with `user`, those of their projects and the site's shared ones."""
    tools = Tool.objects.filter(enabled=True)
    if user is not None:
        tools = scoped(tools, user, shared=True)
    return list(tools.order_by("name").values_list("name", flat=True))


def run_for_page(*, run_id: int) -> Run | None:
    return Run.objects.select_related("agent", "created_by").filter(pk=run_id).first()


def run_reruns(*, run: Run) -> list[Run]:
    return list(Run.objects.filter(rerun_of=run).only("pk", "status", "created_at").order_by("-pk"))


def run_group_name(*, run_id: int) -> str | None:
    """The run's channel group, or None when there is no such run."""
    run = Run.objects.filter(pk=run_id).only("pk").first()
    return run.group_name if run else None


def run_events_after(*, run_id: int, after: int, limit: int = EVENT_BATCH) -> list[dict]:
    """Up to `limit` stored events with seq > after, in order, as the websocket sends them."""
    rows = (
        RunEvent.objects.filter(run_id=run_id, seq__gt=after)
        .order_by("seq")
        .values("seq", "kind", "data", "created_at")[:limit]
    )
    return [
        {"type": "event", "seq": r["seq"], "kind": r["kind"], "data": r["data"], "at": event_at(r["created_at"])}
        for r in rows
    ]


def call_in_run(*, run_id: int, call_pk: int) -> ToolCall | None:
    """The call with its full stored result, only if it belongs to that run."""
    return ToolCall.objects.filter(pk=call_pk, run_id=run_id).first()
