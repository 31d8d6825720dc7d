"""Plain-data views of runs, steps and calls: the CLI's JSON, timeline events and the API share them."""
from runs.models import Approval, Run, RunGrant, Step, ToolCall

PREVIEW_CHARS = 300


def call_data(call: ToolCall) -> dict:
    approval = getattr(call, "approval", None) if _has_approval_cached(call) else None
    return {
        "id": call.call_id,
        "pk": call.pk,
        "index": call.index,
        "tool": call.tool_name,
        "args_hash": call.args_hash,
        "status": call.status,
        "ok": call.ok,
        "error": call.error,
        "truncated": call.truncated,
        "latency_ms": round(call.latency_ms, 2) if call.latency_ms is not None else None,
        "result_preview": call.result_text[:PREVIEW_CHARS],
        "approval": approval_brief(approval) if approval else None,
        "result_edited": result_edit(call),
    }


def result_edit(call: ToolCall) -> dict | None:
    """Who replaced what the model reads of this call's result (a fork's edit), or None."""
    result = call.result
    if isinstance(result, dict) and result.get("edited") is True:
        return {"by": str(result.get("edited_by") or ""), "at": result.get("edited_at")}
    return None


def _has_approval_cached(call: ToolCall) -> bool:
    # Avoid a query per call: only read the approval when it was fetched with the call.
    try:
        return "approval" in call._state.fields_cache
    except AttributeError:
        return False


def approval_brief(approval: Approval) -> dict:
    """One approval as timeline events, the queue's live updates and the API show it (no query)."""
    decided = approval.status != Approval.Status.PENDING
    return {
        "id": approval.pk,
        "status": approval.status,
        # A person's name (kept with the decision: it outlives the account), or what decided
        # without one: "rule 'X' v3", "a grant for this run", "the run's policy", "expiry".
        "decided_by": approval.decider if decided else None,
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
        "reason": approval.reason,
        "guidance": approval.guidance,
        "automatic": approval.automatic,
        "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
        "rule_name": approval.rule_name or None,
        "rule_version": approval.rule_version,
        "required_approvals": approval.required_approvals,
        "approvals_given": approval.approvals_given,
        "edited": bool(approval.edited_args_hash),
        "edited_args_hash": approval.edited_args_hash or None,
    }


def grant_brief(grant: RunGrant) -> dict:
    """A grant as its "grant" timeline events and the API show it."""
    return {
        "grant_id": grant.pk,
        "run_id": grant.run_id,
        "tool": grant.tool_name,
        "scope": "identical" if grant.args_hash else "tool",
        "args_hash": grant.args_hash,  # "" for every call of the tool
        "by": grant.granted_by_name,
        "created_at": grant.created_at.isoformat() if grant.created_at else None,
        "source_approval_id": grant.source_approval_id,
        "revoked": grant.revoked_at is not None,
        "revoked_at": grant.revoked_at.isoformat() if grant.revoked_at else None,
        "revoked_by": grant.revoked_by_name or None,
    }


def step_data(step: Step, calls: list[ToolCall]) -> dict:
    return {
        "index": step.index,
        "iteration": step.iteration,
        "kind": step.kind,
        "model": step.model,
        "finish_reason": step.finish_reason,
        "latency_ms": round(step.latency_ms, 2),
        "tokens_in": step.tokens_in,
        "tokens_out": step.tokens_out,
        "tokens_cached": step.tokens_cached,
        "tokens_reasoning": step.tokens_reasoning,
        "context_tokens": step.context_tokens,
        "tool_definition_tokens": step.tool_definition_tokens,
        "compacted_calls": step.compacted_calls,
        "cost_usd": step.cost_usd,
        "tool_choice": step.tool_choice,
        "tool_choice_fallback": step.tool_choice_fallback,
        "model_errors": step.model_errors,
        "content": step.message.get("content") or "",
        "reasoning": step.reasoning,
        "notes": step.notes,
        "calls": [call_data(c) for c in calls],
    }


def run_summary(run: Run) -> dict:
    return {
        "run_id": run.pk,
        "agent": run.config.get("agent_name", ""),
        "task": run.task,
        "status": run.shown_status,  # "stopping" while an ended run's summary is written
        "stop_reason": run.stop_reason or None,
        "stop_detail": run.stop_detail,
        "answer": run.answer,
        "iterations": run.iterations,
        "usage": {
            "tokens_in": run.tokens_in,
            "tokens_out": run.tokens_out,
            "total_tokens": run.total_tokens,
            "tokens_cached": run.tokens_cached,
            "tokens_reasoning": run.tokens_reasoning,
            "compactions": run.compactions,
            "cost_usd": round(run.cost_usd, 6),
        },
        "wall_seconds": round(run.active_seconds, 3),
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at and not run.summary_pending else None,
    }


def run_data(run: Run) -> dict:
    """The whole run: summary plus every step with its calls (two queries)."""
    calls: dict[int, list[ToolCall]] = {}
    for call in ToolCall.objects.filter(run=run).select_related("approval"):
        calls.setdefault(call.step_id, []).append(call)
    steps = [step_data(s, calls.get(s.pk, [])) for s in Step.objects.filter(run=run).order_by("index")]
    return {**run_summary(run), "steps": steps}
