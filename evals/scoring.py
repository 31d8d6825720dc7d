"""Scoring an experiment's case once its run ended: the run's facts (every requested call,
executed or simulated), each expectation checked, the judge asked where a case has a rubric,
what would have decided each simulated call outside the experiment, and the experiment's
counters, finished when its last case is scored.

Scoring is idempotent (a result is written once, under its row's lock), so the hook's task, a
retry after a worker died, and the catch-up that any page or the eval command runs may all try.
"""
import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from evals import expectations
from evals import judge as judges
from evals.models import CaseResult, Experiment
from runs.engine.dispatch import task_send
from runs.engine.guards import parse_arguments
from runs.models import Run, ToolCall
from runs.supervision.evidence.provenance import call_unseen_ids
from runs.supervision.rules.route_facts import call_route
from toolsapp.models import Tool

log = logging.getLogger("evals.scoring")
SCORE_TASK = "evals.tasks.score_case"
# A case is scored by the thread that ended its run, or its task; the catch-up takes those ended
# longer ago than this (their task was lost), a batch per poll.
CATCH_UP_AFTER_SECONDS = 30
CATCH_UP_BATCH = 50


def case_run_ended(*, run: Run, fields: dict) -> None:
    """The engine's run_ended hook: an experiment's run ends in this transaction; score it after."""
    if not run.experiment:
        return
    run_id = run.pk

    def after():
        # Scored right here, in the thread that ended the run: a task would wait behind the runs
        # queued meanwhile (seconds, in a large experiment). A judge's model call, a summary still
        # on its way or any failure goes to the task instead, which may wait and retry.
        try:
            if case_score(run_id, judge=False) is not None:
                return
        except Exception:
            log.exception("scoring run %s failed; its task tries again", run_id)
        try:
            task_send(SCORE_TASK, run_id)
        except Exception as exc:  # the broker is away: the catch-up scores it (pages, the eval command)
            log.warning("could not queue the scoring of run %s (%s)", run_id, exc)

    transaction.on_commit(after)


def run_facts(run: Run) -> tuple[expectations.RunFacts, list[ToolCall], dict[str, Tool]]:
    calls = list(ToolCall.objects.filter(run=run).select_related("step").order_by("step__index", "index"))
    tools = {t.name: t for t in Tool.objects.filter(name__in={c.tool_name for c in calls})}
    seen = []
    for call in calls:
        tool = tools.get(call.tool_name)
        arguments, _error = parse_arguments(call.arguments)
        unseen: tuple[str, ...] = ()
        if tool is not None and tool.destructive and isinstance(arguments, dict):
            ids, fields = call_unseen_ids(run=run, call=call, arguments=arguments,
                                          sensitive_fields=tool.sensitive_fields or [])
            unseen = (*ids, *(f"{name} (sensitive)" for name in fields))
        seen.append(expectations.SeenCall(call.tool_name, arguments, bool(tool and tool.destructive), call.status, unseen))
    facts = expectations.RunFacts(
        stop_reason=run.stop_reason, answer=run.answer or "", iterations=run.iterations, tokens=run.total_tokens,
        cost_usd=run.cost_usd, seconds=run.active_seconds, customer=run.customer, calls=tuple(seen),
    )
    return facts, calls, tools


def simulated_records(run: Run, calls: list[ToolCall], tools: dict[str, Tool]) -> list[dict]:
    """Each simulated call: where its answer came from, and what would have decided it in a real run."""
    records = []
    for call in calls:
        if call.status != ToolCall.Status.SIMULATED:
            continue
        source = (call.simulation or {}).get("answered_from")
        tool = tools.get(call.tool_name)
        records.append({
            "tool": call.tool_name, "call_id": call.call_id, "step": call.step.index,
            "answered_from": source, "would_be": _would_be(run, call, tool),
        })
    return records


def _would_be(run: Run, call: ToolCall, tool: Tool | None) -> str:
    """What would have happened to the call outside the experiment, in words."""
    if tool is None:
        return "no such tool now"
    if not tool.destructive:
        return "would have run without approval (not idempotent, or kept out of experiments)"
    config = {**run.config, "approval_policy": "ask"}
    try:
        route, _unseen = call_route(call=call, tool=tool, run=run, config=config)
    except Exception as exc:  # a rule or grant that cannot be read now: say so, never fail the score
        return f"could not be worked out ({type(exc).__name__})"
    rule = f" by {route.rule.label}" if route.rule else ""
    if route.status == "approved":
        return f"approved automatically{rule}"
    if route.status == "rejected":
        return f"rejected automatically{rule}"
    who = f"{route.required_approvals} people" if route.required_approvals > 1 else "a person"
    return f"would have waited for {who}{rule}" + (f": {route.note}" if route.note else "")


def case_score(run_id: int, *, judge: bool = True) -> CaseResult | None:
    """Score the case whose run is `run_id`, once it ended (None: not an experiment's, not ended,
    or `judge` is False and the case has a judge's check: its model call is left to the task)."""
    found = list(CaseResult.objects.select_related("case", "run").filter(run_id=run_id).order_by()[:1])
    result = found[0] if found else None
    if result is None or result.status == CaseResult.Status.SCORED:
        return result
    run = result.run
    if not run.is_finished or run.summary_pending:
        return None
    wanted = list(result.expectations)
    if not judge and any(item.get("kind") == "judge" for item in wanted):
        return None
    facts, calls, tools = run_facts(run)
    judgements = {}
    shown = [(c.tool_name, parse_arguments(c.arguments)[0], tools[c.tool_name].sensitive_fields if c.tool_name in tools
              else []) for c in calls] if any(item.get("kind") == "judge" for item in wanted) else []
    for position, item in enumerate(wanted):
        if item.get("kind") == "judge":
            judgements[position] = judges.judge(rubric=item["rubric"], task=run.task, answer=run.answer or "", calls=shown)
    checks = [c.as_dict() for c in expectations.check_all(wanted, facts, judgements)]
    for position, judgement in judgements.items():
        checks[position]["judge"] = {"model": judgement.model, "reason": judgement.reason, "error": judgement.error,
                                     **judgement.extra}
    passed = all(c["ok"] for c in checks)
    simulated = simulated_records(run, calls, tools)
    values = {"status": CaseResult.Status.SCORED, "passed": passed, "checks": checks, "simulated": simulated,
              "stop_reason": run.stop_reason, "iterations": run.iterations, "tokens": run.total_tokens,
              "cost_usd": run.cost_usd, "seconds": run.active_seconds, "scored_at": timezone.now()}
    with transaction.atomic():
        # Written once: whoever scores it first (the hook, its task, a catch-up) counts it.
        if not CaseResult.objects.filter(pk=result.pk, status=CaseResult.Status.RUNNING).update(**values):
            return CaseResult.objects.get(pk=result.pk)
        case_counted(result.experiment_id, passed=passed)
    for name, value in values.items():
        setattr(result, name, value)
    return result


def case_counted(experiment_id: int, *, passed: bool) -> None:
    """One more case done in the experiment's counters, which finishes it when it was the last
    (one statement: every right-hand side reads the row as it was)."""
    last = Q(status=Experiment.Status.RUNNING, cases_total__lte=F("cases_done") + 1)
    Experiment.objects.filter(pk=experiment_id).update(
        cases_done=F("cases_done") + 1, cases_passed=F("cases_passed") + (1 if passed else 0),
        status=Case(When(last, then=Value(Experiment.Status.FINISHED)), default=F("status")),
        finished_at=Case(When(last, then=Value(timezone.now())), default=F("finished_at")),
    )


def score_pending(run_id: int) -> bool:
    """Whether the run is an experiment's case still to be scored (its summary may be on its way)."""
    return CaseResult.objects.filter(run_id=run_id, status=CaseResult.Status.RUNNING).exists()


def experiment_catch_up(experiment: Experiment, *, waited: float = CATCH_UP_AFTER_SECONDS, judge: bool = False) -> int:
    """Score every case of `experiment` whose run ended `waited` seconds ago or more but was not
    scored (its task was lost); how many. Pages, the API and `manage.py eval` call it as they poll:
    then it never asks a judge (that is the task's, queued again here). Whoever drives the runs in
    its own process (`eval --inline`) scores at once, judge included. One case that cannot be
    scored fails alone, saying why."""
    waiting = CaseResult.objects.filter(
        experiment=experiment, status=CaseResult.Status.RUNNING, run__status__in=Run.FINISHED_STATUSES,
        run__summary_pending=False, run__finished_at__lte=timezone.now() - timedelta(seconds=waited))
    scored = 0
    for run_id in list(waiting.values_list("run_id", flat=True)[:CATCH_UP_BATCH]):
        try:
            result = case_score(run_id, judge=judge)
        except Exception as exc:
            log.exception("scoring run %s failed", run_id)
            result = _score_failed(run_id, exc)
        if result is None and not judge:  # a judge's check: its task asks the judge
            _send_later(run_id)
        scored += result is not None
    _finish_if_orphaned(experiment)
    return scored


def _send_later(run_id: int) -> None:
    try:
        task_send(SCORE_TASK, run_id)
    except Exception as exc:
        log.warning("could not queue the scoring of run %s (%s)", run_id, exc)


def _score_failed(run_id: int, exc: Exception) -> CaseResult | None:
    """A case whose scoring raised is scored as failed, saying why, so its experiment still ends."""
    check = {"kind": "score", "label": "the case could be scored", "ok": False, "opinion": False,
             "seen": f"scoring failed: {type(exc).__name__}: {str(exc)[:200]}"}
    with transaction.atomic():
        rows = CaseResult.objects.filter(run_id=run_id, status=CaseResult.Status.RUNNING)
        experiment_id = rows.values_list("experiment_id", flat=True).first()
        if experiment_id is None or not rows.update(status=CaseResult.Status.SCORED, passed=False, checks=[check],
                                                    scored_at=timezone.now()):
            return None
        case_counted(experiment_id, passed=False)
    return CaseResult.objects.get(run_id=run_id)


def _finish_if_orphaned(experiment: Experiment) -> None:
    """A case whose run was deleted (pruned) can never be scored: it counts as failed."""
    orphans = CaseResult.objects.filter(experiment=experiment, status=CaseResult.Status.RUNNING, run__isnull=True)
    for result in orphans:
        with transaction.atomic():
            if CaseResult.objects.filter(pk=result.pk, status=CaseResult.Status.RUNNING).update(
                    status=CaseResult.Status.SCORED, passed=False, scored_at=timezone.now(),
                    checks=[{"kind": "run", "label": "the case's run exists", "ok": False,
                             "seen": "its run was deleted before it was scored", "opinion": False}]):
                case_counted(experiment.pk, passed=False)
