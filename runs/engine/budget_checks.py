"""Where the loop meets the budgets (runs/controls/budgets.py, plugged in through hooks): a run
about to start for the first time waits queued on a spent budget; a started run pauses at the
boundary before a model request that would pass one. Both leave a hold, which the queue shows."""
from django.utils import timezone

from runs.engine import hooks
from runs.engine.storage.records import Recorder, lever_data, paused_at_boundary, run_start

BY = "its budget"  # who paused or held the run, as its page and timeline say it


def start_or_wait(recorder: Recorder) -> bool:
    """Inside the transaction that starts the run: start it (True), or leave it queued on a spent
    budget (False). Only a first start is checked (a resumed run checks at its next boundary)."""
    run, budgets = recorder.run, hooks.budgets()
    if budgets is not None and run.started_at is None:
        found = budgets.reached(run, starting=True, lock=True)
        if found:
            budgets.hold(run, found)
            recorder.event("lever", lever_data("held", BY, timezone.now(), found.sentence))
            return False
        budgets.admitted(run)
    run_start(recorder)
    return True


def reached_before_request(run):
    """The spent budget that stops `run` before its next model request, or None."""
    budgets = hooks.budgets()
    return budgets.reached(run, starting=False) if budgets is not None else None


def pause_on_budget(recorder: Recorder, found, *, elapsed: float) -> None:
    """Pause at this boundary as the pause lever does, waiting on the budget found."""
    recorder.run.paused_by_name = BY
    recorder.run_update(paused_by_name=BY)
    paused_at_boundary(recorder, elapsed=elapsed, text=found.sentence)
    hooks.budgets().hold(recorder.run, found)
