"""Hand-made decision histories whose figures are known: approvals of one project's calls with
the times they were asked, shown and decided, what became of the call, and its evidence."""
from datetime import UTC, datetime, time, timedelta

from django.utils import timezone

from runs.models import Agent, Approval, CallEvidence, Run, Step, ToolCall

S = Approval.Status
# Day 20 is today (UTC, the tests' site zone), so the pages' own "now" holds every day before it.
TODAY = datetime.combine(timezone.now().astimezone(UTC).date(), time.min, tzinfo=UTC)
NOW = TODAY + timedelta(hours=15)  # "now" for the scopes the figure tests make themselves


def at(day: int, hour: int = 10, second: float = 0) -> datetime:
    """Day `day` of a month whose 20th is today, at `hour` UTC, plus `second` seconds."""
    return TODAY + timedelta(days=day - 20, hours=hour, seconds=second)


def agent_in(project, name: str | None = None) -> Agent:
    return Agent.objects.create(name=name or f"agent-{project.slug}", project=project)


def run_of(agent) -> Run:
    run = Run.objects.create(agent=agent, task="t", status=Run.Status.SUCCEEDED)
    Step.objects.create(run=run, index=1, iteration=1, model="m", message={"role": "assistant"})
    return run


def decided(run, *, by=None, status=S.APPROVED, asked: datetime, shown: float | None = None, took: float | None = 10,
            tool="cancel_order", call_status=ToolCall.Status.SUCCEEDED, result_text="", args_hash="h",
            identity="", state=None, reason="", automatic=False, evidence=True) -> Approval:
    """One approval of a `tool` call in `run`, asked at `asked`, its card shown `shown` seconds
    later (None: never shown), decided `took` seconds after the card appeared (None: pending)."""
    step = run.steps.first()
    index = ToolCall.objects.filter(step=step).count()
    call = ToolCall.objects.create(run=run, step=step, index=index, call_id=f"c{index}", tool_name=tool,
                                   arguments="{}", args_hash=args_hash, idempotency_key=f"{run.pk}-{index}",
                                   status=call_status, result_text=result_text)
    appeared = asked + timedelta(seconds=shown or 0)
    approval = Approval.objects.create(
        tool_call=call, run=run, status=status, automatic=automatic, reason=reason,
        decided_by=by if not automatic and status in (S.APPROVED, S.REJECTED) else None,
        decided_by_name=by.get_username() if by is not None and not automatic else "",
    )
    decided_at = appeared + timedelta(seconds=took) if took is not None else None
    Approval.objects.filter(pk=approval.pk).update(requested_at=asked, decided_at=decided_at)
    if evidence:
        CallEvidence.objects.create(approval=approval, project_id=run.agent.project_id, tool_name=tool,
                                    identity=identity, state=state or {},
                                    shown_at=appeared if shown is not None else None)
        CallEvidence.objects.filter(pk=approval.pk).update(created_at=asked)
    approval.refresh_from_db()
    return approval
