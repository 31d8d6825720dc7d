"""Operators' levers on a live run: pause, resume, a note for the agent, stop with a summary.

Each lever is one conditional UPDATE over a run that is still active, with its "lever" event (the
timeline, streamed live, and the audit trail) in the same transaction. A lever that races the
run's own end therefore has exactly one outcome: it applies, or it is refused ("Too late: the run
ended as ...") and changes nothing. A run that a worker drives applies a pause or a stop at its
next boundary (loop.py); one that nobody drives (queued, awaiting approval, paused) at once.

Who may pull them (runs.cancel_run) is checked by the callers: views, API and websocket.
"""
from django.db.models import F, Q
from django.utils import timezone

from runs.controls.budgets import reached
from runs.controls.lever_declaration import PAUSED, UNPAUSED, Body, Button, Lever
from runs.controls.lever_state import operator_note_data
from runs.engine.dispatch import run_dispatch
from runs.engine.loop import run_levers_apply
from runs.engine.storage.db import write_transaction
from runs.engine.storage.events import event_record, events_store
from runs.engine.storage.records import lever_data
from runs.engine.storage.snapshots import run_summary
from runs.engine.storage.text import storable_text
from runs.models import Approval, BudgetHold, OperatorMessage, Run
from runs.models.levers import NOTE_MAX_CHARS

MESSAGE_MAX_CHARS = NOTE_MAX_CHARS
# Pausing a run that is already paused, or ending anyway, means nothing.
PAUSABLE = (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.AWAITING_APPROVAL)
# A run that an operator asked to end takes no other lever.
NOT_ENDING = Q(cancel_requested=False, stop_requested_by_name="")


class LeverRefused(Exception):
    """A lever that cannot apply, in words for the operator; nothing was changed."""


def operator_name(user) -> str:
    """Who pulled a lever on a run (a cancel, a pause, a note...), as its timeline and detail say it."""
    return user.get_username() if user is not None and getattr(user, "is_authenticated", False) else "an operator"


def run_pause(*, run_id: int, user) -> Run:
    """Pause the run at its next boundary (at once when nobody drives it)."""
    name = operator_name(user)
    only_if = Q(status__in=PAUSABLE, pause_requested=False) & NOT_ENDING
    if not _lever(run_id, only_if, "pause", name, pause_requested=True, paused_by_name=name):
        raise _refused(run_id, "pause")
    return run_levers_apply(run_id=run_id) or Run.objects.get(pk=run_id)


def run_resume(*, run_id: int, user) -> Run:
    """A paused run goes on exactly where it stopped: queued for a worker, or still awaiting the
    decisions that are pending."""
    held = BudgetHold.objects.filter(run_id=run_id, run__status=Run.Status.PAUSED).select_related("run").first()
    if held is not None and reached(held.run, starting=False) is not None:
        raise LeverRefused(f"{held.sentence}: an administrator raises the budget in the approvals queue, "
                           "or stop the run with a summary.")
    if not _resume(run_id, operator_name(user)):
        raise _refused(run_id, "resume")
    return Run.objects.get(pk=run_id)


def budget_resume(*, run_id: int, by: str) -> None:
    """A run a budget held goes on (the budget was raised, or its period turned): a paused one as
    the resume lever does it, a queued one handed to the workers again. It checks its budgets
    again at its next boundary."""
    if not _resume(run_id, by):
        with write_transaction():
            if Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).exists():
                run_dispatch(run_id=run_id)


def _resume(run_id: int, name: str) -> bool:
    with write_transaction():
        waiting = Approval.objects.filter(run_id=run_id, status=Approval.Status.PENDING).exists()
        status = Run.Status.AWAITING_APPROVAL if waiting else Run.Status.QUEUED
        # A decision made between the read above and this UPDATE did not dispatch the paused run:
        # the sweep hands out an awaiting run whose decisions are all in.
        if not _lever(run_id, Q(status=Run.Status.PAUSED), "resume", name, status=status, pause_requested=False):
            return False
        BudgetHold.objects.filter(run_id=run_id).delete()  # it checks its budgets again at its next boundary
        event_record(run_id=run_id, kind="run", data=run_summary(Run.objects.get(pk=run_id)))
        if status == Run.Status.QUEUED:
            run_dispatch(run_id=run_id)
    return True


def run_message(*, run_id: int, user, text: str) -> OperatorMessage:
    """A note for the agent, sent as a user message before its next model request."""
    text = (text or "").strip()
    if not text:
        raise LeverRefused("The message is empty.")
    if len(text) > MESSAGE_MAX_CHARS:
        raise LeverRefused(f"The message is too long: at most {MESSAGE_MAX_CHARS} characters.")
    if not storable_text(text):
        raise LeverRefused("The message contains a NUL or an unpaired surrogate character.")
    name = operator_name(user)
    with write_transaction():
        if not _lever(run_id, Q(status__in=Run.ACTIVE_STATUSES) & NOT_ENDING, "message", name, text=text):
            raise _refused(run_id, "message")
        author = user if user is not None and user.is_authenticated else None
        return OperatorMessage.objects.create(run_id=run_id, text=text, author=author, author_name=name)


def run_stop(*, run_id: int, user) -> Run:
    """End the run with a summary: at its next boundary, or at once (summary call included) when
    nobody drives it."""
    name = operator_name(user)
    only_if = Q(status__in=Run.ACTIVE_STATUSES) & NOT_ENDING
    if not _lever(run_id, only_if, "stop", name, stop_requested_by_name=name):
        raise _refused(run_id, "stop")
    return run_levers_apply(run_id=run_id) or Run.objects.get(pk=run_id)


# --- helpers ----------------------------------------------------------------------------------------


def _lever(run_id: int, only_if: Q, lever: str, name: str, *, text: str | None = None, **fields) -> bool:
    """Set `fields` and record the lever's event, only over a run `only_if` still holds: one
    conditional UPDATE (which also takes the event's number), so a run that ended meanwhile is
    left as it is. False when it did not hold."""
    with write_transaction():
        changed = Run.objects.filter(only_if, pk=run_id).update(event_seq=F("event_seq") + 1, **fields)
        if not changed:
            return False
        # The row is ours until commit: its number is the one this UPDATE took.
        seq = Run.objects.filter(pk=run_id).values_list("event_seq", flat=True).get()
        events_store(run_id=run_id, first_seq=seq, events=[("lever", lever_data(lever, name, timezone.now(), text))])
    return True


def _refused(run_id: int, lever: str) -> LeverRefused:
    """Why `lever` could not apply to the run as it is now. Raises Run.DoesNotExist."""
    run = Run.objects.get(pk=run_id)
    if run.is_finished:
        reason = f" ({run.get_stop_reason_display()})" if run.stop_reason else ""
        return LeverRefused(f"Too late: the run ended as {run.get_status_display()}{reason}.")
    if run.cancel_requested:
        return LeverRefused("Too late: the run is being cancelled.")
    if run.stop_requested_by_name:
        return LeverRefused(f"Too late: {run.stop_requested_by_name} asked the run to stop with a summary.")
    if lever == "pause" and run.status == Run.Status.PAUSED:
        return LeverRefused(f"The run is already paused (by {run.paused_by_name or 'an operator'}).")
    if lever == "pause" and run.pause_requested:
        return LeverRefused(f"{run.paused_by_name or 'An operator'} already asked it to pause: it pauses at its next boundary.")
    if lever == "resume":
        return LeverRefused(f"The run is not paused (it is {run.get_status_display().lower()}).")
    return LeverRefused("The run changed meanwhile: look at it again.")


# --- the levers, declared once (runs/controls/lever_declaration.py says what derives from this) ----


def _pause_page(run: Run) -> str:
    if run.status == Run.Status.PAUSED:
        return f"Run {run.pk} is paused."
    return f"Run {run.pk} pauses after its current step."


def _pause_api(run: Run) -> str:
    return f"Run {run.pk} is paused." if run.status == Run.Status.PAUSED else f"Run {run.pk} will pause at its next boundary."


def _resume_api(run: Run) -> str:
    waiting = run.status == Run.Status.AWAITING_APPROVAL
    return f"Run {run.pk} resumed" + (": it waits for its pending decisions." if waiting else ".")


def _stop_page(run: Run) -> str:
    if run.is_finished:
        return f"Run {run.pk} was stopped; the model was asked for a summary."
    return f"Run {run.pk} stops after its current step and asks the model for a summary."


def _stop_api(run: Run) -> str:
    return f"Run {run.pk} stopped." if run.is_finished else f"Run {run.pk} will stop with a summary at its next boundary."


DECLARED = (
    Lever(
        name="pause", pull=run_pause, timeline="Pause requested by",
        button=Button("Pause", group="steer", shown_when=UNPAUSED, asked_flag="pause_requested",
                      help="Pause stops after the current step and holds no worker; Resume goes on exactly where it stopped."),
        page_answer=_pause_page, api_answer=_pause_api,
        api_summary="Pause a run at its next boundary (at once if nobody drives it); it holds no worker while paused",
    ),
    Lever(
        name="resume", pull=run_resume, timeline="Resumed by",
        button=Button("Resume", group="steer", shown_when=PAUSED, style="primary"),
        page_answer=lambda run: f"Run {run.pk} resumes.", api_answer=_resume_api,
        api_summary="Resume a paused run exactly where it stopped",
    ),
    Lever(
        name="message", pull=run_message,
        button=Button("Send to the agent", group="steer"),
        body=Body(field="text", max_chars=MESSAGE_MAX_CHARS, label="Message the agent",
                  placeholder="A note for the agent: it gets it as a user message before its next model request.",
                  help="Sent to the agent as a user message.", example=("A hint", "Check order ORD-1002 too.")),
        page_answer=lambda run: "Your message goes to the agent before its next model request.",
        api_answer=lambda run: f"The note waits for run {run.pk}'s next model request.",
        api_extra=lambda note: {"message": operator_note_data(note)},
        api_summary="Send the agent a note, as a user message before its next model request",
    ),
    Lever(
        name="stop", pull=run_stop, timeline="Stop with a summary requested by",
        button=Button("Stop with a summary", group="end", asked_flag="stop_requested_by_name", style="danger",
                      help="Ends the run at its next step; the model then writes a summary of what was done, "
                           "without calling tools.",
                      confirm="Stop this run now? The model writes a summary of what it did, without tools; "
                              "the run cannot go on after."),
        page_answer=_stop_page, api_answer=_stop_api,
        api_summary="End a run with a summary: the model is asked, without tools, what was done",
    ),
)

# Every lever by its name, as the run's socket and the API take it.
LEVERS = {lever.name: lever for lever in DECLARED}
