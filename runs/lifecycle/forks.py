"""Forking a run from one of its steps: a new run that starts from a copy of its parent's conversation.

The copy is rows, not a replay: the parent's steps up to and including the fork step and their
tool calls, with the results as recorded. Nothing copied runs again (a copied call is done by
definition: one that had no result yet is closed as not executed, or as of unknown outcome when it
had started), so only the fork's new calls have effects, each under its own idempotency key (keys
derive from the fork's id), destructive ones through approval like any run's.

The fork's settings are its agent's as they are now, not the parent's frozen ones (fork_settings.py):
a tool an admin took away is not offered again, a lowered limit holds; its "fork" event says what
differs from the parent's settings. The fork's counters count the copied steps (iterations, tokens,
cost): its limits apply to the conversation as a whole, so forking cannot stretch a run past its
budgets, and a fork whose copied steps already reach one is refused. Its wall time starts at zero.
Its approval policy is "ask", whatever the parent's.
"""
from django.conf import settings
from django.utils import timezone

from runs.engine.dispatch import run_dispatch
from runs.engine.storage.db import write_transaction
from runs.engine.storage.events import events_store
from runs.engine.storage.records import set_result
from runs.engine.storage.snapshots import run_summary, step_data
from runs.engine.storage.text import storable_text
from runs.lifecycle.fork_settings import config_differences, fork_settings, spent_problem
from runs.lifecycle.runs import InvalidRun
from runs.models import Approval, OperatorMessage, Run, Step, ToolCall
from runs.models.levers import NOTE_MAX_CHARS

EDIT_KINDS = ("tool_result", "answer", "message")
EDIT_SHAPES = '{"tool_result": {"call_id": "...", "content": "..."}}, {"answer": "..."} or {"message": "..."}'
MESSAGE_CHARS = NOTE_MAX_CHARS  # an operator's note, as for the message lever
ANSWER_CHARS = 20_000
MAX_STEP = 2**31 - 1  # what a step index column holds
NOT_EXECUTED = "not executed: the run was forked before this call finished"
STEP_FIELDS = ("index", "iteration", "kind", "preamble", "model", "tool_choice", "tool_choice_fallback", "finish_reason",
               "message", "latency_ms", "tokens_in", "tokens_out", "cost_usd", "model_errors",
               "reasoning", "notes", "tokens_cached", "tokens_reasoning", "context_tokens", "tool_definition_tokens",
               "compacted_calls")
CALL_FIELDS = ("index", "call_id", "tool_name", "arguments", "args_hash", "idempotency_key", "status", "result",
               "result_text", "truncated", "error", "latency_ms", "attempts", "started_at", "finished_at",
               "executed_arguments", "executed_args_hash")


class ForkRefused(Exception):
    """A fork that cannot be made; the message says why in words."""


def run_fork(*, run_id: int, step_index: int, user, edit: dict | None = None) -> Run:
    """A new queued run of `run_id`'s agent, task, customer and frozen config, whose conversation
    is the parent's up to and including step `step_index`, optionally edited (`edit`, one of
    EDIT_SHAPES), handed to a worker once committed. Raises ForkRefused. Callers check that
    `user` may launch runs (runs.add_run) and see this one."""
    kind, value = fork_edit(edit)
    if isinstance(step_index, bool) or not isinstance(step_index, int) or step_index < 1:
        raise ForkRefused(f"A step is a positive whole number, not {step_index!r}.")
    by = _name(user)
    with write_transaction():
        parent = Run.objects.select_related("agent").filter(pk=run_id).first()
        if parent is None:
            raise ForkRefused(f"There is no run {run_id}.")
        if parent.experiment:
            raise ForkRefused(f"Run {parent.pk} is an experiment's: a fork of it would run for real from results that "
                              "were simulated. Run its experiment again instead.")
        steps = list(Step.objects.filter(run=parent, index__lte=min(step_index, MAX_STEP)).order_by("index"))
        if not steps or steps[-1].index != step_index:
            count = Step.objects.filter(run=parent).count()
            raise ForkRefused(f"Run {parent.pk} has no step {step_index}; it has {count} step{'s' * (count != 1)} so far.")
        if steps[-1].iteration < 1:
            raise ForkRefused(f"Step {step_index} is the summary of a run that stopped before its first iteration: "
                              "there is no conversation to go on from.")
        calls = list(ToolCall.objects.filter(step__in=steps).select_related("approval").order_by("step__index", "index"))
        _check_edit(kind, value, step_index, [c for c in calls if c.step_id == steps[-1].pk])
        config, overrides = _settings(parent, steps, step_index, user)
        fork = _fork_row(parent, steps, config, overrides, step_index, user)
        new_steps, new_calls = _copy(fork, steps, calls, parent=parent)
        _apply_edit(kind, value, new_steps[-1], new_calls[new_steps[-1].pk], by)
        notes = _copy_notes(parent, fork, {old.pk: new for old, new in zip(steps, new_steps)})
        fork_event = _fork_event(parent, step_index, kind, value, by)
        events = [("fork", {**fork_event, "differences": config_differences(parent.config, config)})]
        for step in new_steps:  # as the parent's timeline showed them: each note, then the step that sent it
            events += [("lever", _note_event(note)) for note in notes.get(step.pk, [])]
            events.append(("step", step_data(step, new_calls[step.pk])))
        if kind == "message":  # waits for the fork's first request
            note = OperatorMessage.objects.create(run=fork, text=value, author=_person(user), author_name=by)
            events.append(("lever", _note_event(note)))
        events.append(("run", run_summary(fork)))
        # Nobody else knows the fork yet: its events are numbered from 1 in one statement.
        Run.objects.filter(pk=fork.pk).update(event_seq=len(events))
        fork.event_seq = len(events)
        events_store(run_id=fork.pk, first_seq=1, events=events)
        run_dispatch(run_id=fork.pk)
    return fork


def fork_edit(edit) -> tuple[str | None, object]:
    """(kind, value) of an edit, checked for shape and storable text; (None, None) for no edit."""
    if edit is None or edit == {}:
        return None, None
    if not isinstance(edit, dict) or len(edit) != 1 or next(iter(edit)) not in EDIT_KINDS:
        raise ForkRefused(f"An edit is one of {EDIT_SHAPES}.")
    kind, value = next(iter(edit.items()))
    if kind == "tool_result":
        if not (isinstance(value, dict) and set(value) == {"call_id", "content"}
                and isinstance(value["call_id"], str) and isinstance(value["content"], str)):
            raise ForkRefused('A tool result edit names the call and the new result: '
                              '{"tool_result": {"call_id": "...", "content": "..."}}.')
        _check_text("The edited result", value["content"], settings.TOOL_RESULT_MAX_CHARS)
        _check_text("The call id", value["call_id"], 10_000)
        return kind, value
    what, limit = ("The edited answer", ANSWER_CHARS) if kind == "answer" else ("The message", MESSAGE_CHARS)
    if not isinstance(value, str):
        raise ForkRefused(f"{what} must be text.")
    value = value.strip()
    _check_text(what, value, limit)
    return kind, value


def _check_text(what: str, text: str, limit: int) -> None:
    if not text.strip():
        raise ForkRefused(f"{what} is empty.")
    if len(text) > limit:
        raise ForkRefused(f"{what} is longer than {limit} characters.")
    if not storable_text(text):
        raise ForkRefused(f"{what} contains a NUL or an unpaired surrogate character.")


def _check_edit(kind: str | None, value, step_index: int, step_calls: list[ToolCall]) -> None:
    """The edit must fit the fork step: a result of one of its calls, or the text of an answer
    that called no tools (replacing only the text would leave its calls without their request)."""
    if kind == "tool_result":
        ids = [c.call_id for c in step_calls]
        if not ids:
            raise ForkRefused(f"Step {step_index} made no tool calls, so it has no result to edit.")
        if value["call_id"] not in ids:
            raise ForkRefused(f"Step {step_index} has no call with id {value['call_id']!r}; "
                              f"its calls are {', '.join(repr(i) for i in ids)}.")
        if ids.count(value["call_id"]) > 1:
            raise ForkRefused(f"Step {step_index} has several calls with id {value['call_id']!r}; "
                              "their results cannot be told apart.")
    elif kind == "answer" and step_calls:
        raise ForkRefused(f"The model's answer at step {step_index} called tools: only an answer without calls "
                          "can be replaced. Edit one of the results instead, or fork from a step without calls.")


def copied_counters(steps: list[Step]) -> dict:
    """What the copied steps used, which the fork starts with."""
    return {"iterations": max((s.iteration for s in steps), default=0),
            "tokens_in": sum(s.tokens_in for s in steps), "tokens_out": sum(s.tokens_out for s in steps),
            "cost_usd": sum(s.cost_usd for s in steps)}


def fork_refusal(parent: Run, steps: list[Step], step_index: int, user) -> tuple[dict | None, dict, str | None]:
    """(config, overrides, None) of a fork of `parent` after `steps` (up to step `step_index`), or
    (None, {}, why it cannot be made) when the agent's settings now leave it nothing to do."""
    try:
        config, overrides = fork_settings(parent=parent, user=user)
    except InvalidRun as exc:
        return None, {}, f"You may not fork this run: {exc}."
    used = copied_counters(steps)
    problem = spent_problem(config, agent_name=parent.agent.name, iterations=used["iterations"],
                            tokens=used["tokens_in"] + used["tokens_out"], cost=used["cost_usd"])
    if problem:
        return None, {}, f"You may not fork run {parent.pk} from step {step_index}: {problem}"
    return config, overrides, None


def fork_preview(*, parent: Run, steps: list[Step], step_index: int, user) -> dict:
    """What the fork form says before a fork after `steps` is made: {"differences": what differs
    from the parent's settings, "refusal": why it would be refused, or None}. Changes nothing."""
    config, _overrides, refusal = fork_refusal(parent, steps, step_index, user)
    if config is None:
        try:
            config, _overrides = fork_settings(parent=parent, user=user)
        except InvalidRun:
            return {"differences": [], "refusal": refusal}
    return {"differences": config_differences(parent.config, config), "refusal": refusal}


def _settings(parent: Run, steps: list[Step], step_index: int, user) -> tuple[dict, dict]:
    config, overrides, refusal = fork_refusal(parent, steps, step_index, user)
    if refusal:
        raise ForkRefused(refusal)
    return config, overrides


def _fork_row(parent: Run, steps: list[Step], config: dict, overrides: dict, step_index: int, user) -> Run:
    # The config is derived afresh, so a model endpoint the host's operator typed at the shell is
    # not trusted for the fork (as for re-runs).
    counters = copied_counters(steps)
    return Run.objects.create(
        agent=parent.agent, task=parent.task, customer=parent.customer, config=config,
        overrides=overrides, created_by=_person(user), agent_version=parent.agent.version or None,
        forked_from=parent, forked_at_step=step_index, **counters,
        # The same again, kept: what the fork did itself is its counters less these (own_work.py).
        **{f"inherited_{name}": value for name, value in counters.items()},
        # Parts of the tokens above, as its steps hold them (the metrics read the steps' own).
        tokens_cached=sum(s.tokens_cached for s in steps), tokens_reasoning=sum(s.tokens_reasoning for s in steps),
    )


def _copy(fork: Run, steps: list[Step], calls: list[ToolCall], *, parent: Run) -> tuple[list[Step], dict[int, list[ToolCall]]]:
    """The fork's copies of the steps and their calls: {new step pk: its calls}. A copied call keeps
    the key it ran under (its recorded effect was made with it) and points at the decision that let
    it run, which stays the parent's (no second approval in the queue or the audit)."""
    new_steps = Step.objects.bulk_create([Step(run=fork, **{f: getattr(s, f) for f in STEP_FIELDS}) for s in steps])
    if any(s.pk is None for s in new_steps):  # backends that cannot return ids from a bulk insert
        new_steps = list(Step.objects.filter(run=fork).order_by("index"))
    step_for = {old.pk: new for old, new in zip(steps, new_steps)}
    copies = []
    for call in calls:
        copy = ToolCall(run=fork, step=step_for[call.step_id], **{f: getattr(call, f) for f in CALL_FIELDS})
        if call.status not in ToolCall.DONE_STATUSES:
            _close_unfinished(copy, call, parent)
        elif call.approval is not None and call.approval.status != Approval.Status.PENDING:
            copy.approval = call.approval
        copies.append(copy)
    created = ToolCall.objects.bulk_create(copies)
    if any(c.pk is None for c in created):
        created = list(ToolCall.objects.filter(run=fork).select_related("approval").order_by("step__index", "index"))
    by_step: dict[int, list[ToolCall]] = {s.pk: [] for s in new_steps}
    for call in created:
        by_step[call.step_id].append(call)
    return new_steps, by_step


def _close_unfinished(copy: ToolCall, call: ToolCall, parent: Run) -> None:
    """A call of the parent with no result yet is never run by the fork; its model is told so."""
    if call.may_have_taken_effect:
        error = (f"outcome unknown: run {parent.pk} was forked while this call was running there; "
                 "it may have taken effect, and this run will not run it")
        set_result(copy, {"ok": False, "error": error}, ToolCall.Status.UNKNOWN)
    else:
        set_result(copy, {"ok": False, "error": NOT_EXECUTED}, ToolCall.Status.SKIPPED)
    copy.latency_ms = None


def _apply_edit(kind: str | None, value, step: Step, calls: list[ToolCall], by: str) -> None:
    """The edit, on the fork's copy of the fork step (already checked by _check_edit)."""
    if kind == "tool_result":
        _edit_result(next(c for c in calls if c.call_id == value["call_id"]), value["content"], by)
    elif kind == "answer":
        step.message = {**step.message, "content": value}
        step.save(update_fields=["message"])


def _edit_result(call: ToolCall, content: str, by: str) -> None:
    """What the model reads of the call becomes `content`, exactly. The call's status and error
    stay what really happened; its stored result says who replaced what."""
    call.result = {"ok": call.ok, "edited": True, "edited_by": by, "edited_at": timezone.now().isoformat(),
                   "content": content, "recorded": call.result}
    call.result_text = content
    call.truncated = False
    call.save(update_fields=["result", "result_text", "truncated"])


def _copy_notes(parent: Run, fork: Run, step_for: dict[int, Step]) -> dict[int, list[OperatorMessage]]:
    """Operators' notes the copied steps sent go along (already sent, with who typed them and
    when): {new step pk: its notes}. Their text reaches the model in the steps' preambles."""
    copies: dict[int, list[OperatorMessage]] = {}
    for note in OperatorMessage.objects.filter(run=parent, step__in=list(step_for)).order_by("created_at", "pk"):
        step = step_for[note.step_id]
        copy = OperatorMessage.objects.create(run=fork, text=note.text, author_id=note.author_id,
                                              author_name=note.author_name, step=step)
        OperatorMessage.objects.filter(pk=copy.pk).update(created_at=note.created_at)  # when it was typed
        copy.created_at = note.created_at
        copies.setdefault(step.pk, []).append(copy)
    return copies


def _note_event(note: OperatorMessage) -> dict:
    """A note's "lever" event, as the message lever records it."""
    return {"lever": "message", "by": note.author_name, "at": note.created_at.isoformat(), "text": note.text}


def _fork_event(parent: Run, step_index: int, kind: str | None, value, by: str) -> dict:
    data = {"parent": parent.pk, "step": step_index, "edit": kind, "by": by, "at": timezone.now().isoformat()}
    if kind == "tool_result":
        data["call_id"] = value["call_id"]
    return data


def _person(user):
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def _name(user) -> str:
    person = _person(user)
    return person.get_username() if person is not None else "the host's operator"
