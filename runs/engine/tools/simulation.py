"""What an experiment's call that would change something gets instead of running.

An experiment (the evals app) runs a dataset's cases through the real loop, and nothing may leave
it: a call of a tool that is destructive or not idempotent (or that an admin said never runs in
experiments, see Tool.simulated_in_experiments) is never handed to its tool. When the case's
source run made the same call (same tool, same arguments once canonical), the model gets that
run's recorded result; otherwise a result saying it was not executed. Either way the call is
recorded as simulated, with where its answer came from.
"""
import json

from django.conf import settings

from runs.engine.guards import args_hash, parse_arguments
from runs.engine.tools.execution import reads_only
from runs.models import ToolCall
from toolsapp.models import Tool
from toolsapp.sensitive import masked

# Results of a source run's calls that were answered (a call skipped or of unknown outcome has no answer to reuse).
ANSWERED = (ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED, ToolCall.Status.REJECTED)


def canonical(arguments) -> str | None:
    """One text for equal arguments, whatever their key order or spacing; None for unreadable JSON."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return None
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def simulated_in_experiments(tool: Tool) -> bool:
    """Whether an experiment's call of `tool` is simulated instead of run: by default every tool
    but those that only read (an in-process handler registered read-only, idempotent, not
    destructive); an admin may say "real" (runs for real in experiments) or "never". A destructive
    tool is always simulated: each of its calls needs a person, and an experiment asks no one."""
    if tool.destructive:
        return True
    if tool.in_experiments == "real":
        return False
    if tool.in_experiments == "never":
        return True
    return not reads_only(tool)


def not_executed(tool_name: str) -> dict:
    return {
        "ok": False,
        "error": f"not executed: this is an experiment, and {tool_name} would change something, so it was "
                 "simulated and changed nothing",
    }


def open_calls_settle(calls: list[ToolCall], *, facts: dict, simulator: "Simulator", recorder) -> list[ToolCall]:
    """An experiment's calls left open by a crash, settled without asking anyone: a call of a tool
    simulated now is simulated; one that had started may have taken effect (a tool that runs for
    real) and is recorded as of unknown outcome. The calls left to run as usual are returned."""
    def runs_as_usual(call) -> bool:
        tool = facts.get(call.tool_name)
        return call.status == ToolCall.Status.PENDING and tool is not None and not tool.simulated

    if all(runs_as_usual(call) for call in calls):  # every iteration's case: nothing to write
        return calls
    left = []
    with recorder.transaction():
        for call in calls:
            if runs_as_usual(call):
                left.append(call)
            elif not call.may_have_taken_effect:
                payload, call.simulation, text = simulator.answer(call.tool_name, call.args_hash)
                recorder.call_update(call, ToolCall.Status.SIMULATED, payload=payload, simulation=call.simulation)
                if text is not None:
                    ToolCall.objects.filter(pk=call.pk).update(result_text=text)
                    call.result_text = text
            else:
                error = "outcome unknown: the experiment's worker stopped while the call ran; an experiment asks no one"
                recorder.call_update(call, ToolCall.Status.UNKNOWN, payload={"ok": False, "error": error})
    return left


def recorded_answers(run_id: int) -> list[dict]:
    """A run's answered calls, the first of each (tool, arguments), as a case keeps them: copied
    when the case is made, so its experiments answer the same whatever becomes of the run (pruned
    after RUN_RETENTION_DAYS). Matched by the arguments' keyed hash; the arguments kept for people
    to read have their sensitive fields masked."""
    rows = list(ToolCall.objects.filter(run_id=run_id, status__in=ANSWERED, result__isnull=False)
                .order_by("step__index", "index")
                .values_list("tool_name", "args_hash", "arguments", "result", "result_text", "call_id"))
    sensitive = dict(Tool.objects.filter(name__in={row[0] for row in rows}).values_list("name", "sensitive_fields"))
    answers, seen = [], set()
    for tool_name, hashed, arguments, result, text, call_id in rows:
        parsed, _error = parse_arguments(arguments)
        if parsed is None or not isinstance(result, dict) or (tool_name, hashed) in seen:
            continue
        seen.add((tool_name, hashed))
        shown = canonical(masked(parsed, sensitive.get(tool_name) or []))
        answers.append({"tool": tool_name, "args_hash": hashed, "arguments": shown, "result": result, "text": text,
                        "run": run_id, "call_id": call_id})
    return answers


class Simulator:
    """Answers for one experiment run's simulated calls: `answers` as recorded_answers gives them
    (the case's copy of its source run's calls; none for a case written by hand). An answer written
    by hand may give its `arguments` instead of their `args_hash`."""

    def __init__(self, answers: list[dict] | None):
        self.answers = {}
        for item in answers or ():
            if not isinstance(item, dict):
                continue
            key = item.get("args_hash")
            if not isinstance(key, str) and isinstance(item.get("arguments"), str):
                key = args_hash(item["arguments"], settings.ARGS_HASH_KEY)
            self.answers.setdefault((item.get("tool"), key), item)

    def answer(self, tool_name: str, arguments_hash: str) -> tuple[dict, dict, str | None]:
        """(the payload recorded, the call's `simulation` record, the text the model reads: the
        source call's own, exactly as that run's model read it, or None to make it from the payload;
        PostgreSQL keeps a result as jsonb, its keys reordered, so the text is kept too)."""
        found = self.answers.get((tool_name, arguments_hash))
        if found is None or not isinstance(found.get("result"), dict):
            return not_executed(tool_name), {"answered_from": None}, None
        text = found.get("text") if isinstance(found.get("text"), str) else None
        return found["result"], {"answered_from": {"run": found.get("run"), "call_id": found.get("call_id")}}, text
