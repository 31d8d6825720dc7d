"""How the engine reaches the rest of the product without importing it.

The engine knows two things beyond itself. A gate decides what happens to a call that may not
simply run: supervision's approvals, which also close what is still pending when a run ends.
Listeners are told what the engine committed: observability's rollups and trace export (and any
later one). Both are registered once, in RunsConfig.ready(); the engine calls them inside the
transaction that writes what they are told about, in the order they registered.

With no gate registered a call that needs one is refused, never run: the engine fails closed.
"""
from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

# What the loop does with a call once its gate is passed.
RUN, WAIT, DONE = "run", "wait", "done"

_gate: Callable[..., str] | None = None
_budgets = None  # supervision's budgets (runs/controls/budgets.py): none, no budget holds a run
_listeners: dict[str, list[Callable]] = {"run_ending": [], "run_ended": [], "records_committed": [], "summary_added": []}


def register_gate(gate: Callable[..., str]) -> None:
    """gate(*, call, tool, config, recorder) -> RUN, WAIT or DONE, for a call that may not simply run."""
    global _gate
    _gate = gate


def register_budgets(budgets) -> None:
    """`budgets` has reached(run, *, starting, lock) -> a Reached or None, and hold(run, reached) and
    admitted(run), which write inside the caller's transaction."""
    global _budgets
    _budgets = budgets


def budgets():
    return _budgets


def subscribe(point: str, listener: Callable) -> None:
    """Call `listener` at `point` (one of _listeners' keys); subscribing twice is once."""
    if listener not in _listeners[point]:
        _listeners[point].append(listener)


def call_gate(*, call, tool, config: dict, recorder) -> str:
    """The gate's answer for one open call of `recorder.run` (`tool`: as it is now, or None)."""
    if _gate is None:
        raise ImproperlyConfigured("No approval gate is registered (runs.apps.RunsConfig.ready registers it).")
    recorder.approvals_possible = True  # the gate may ask a person
    return _gate(call=call, tool=tool, config=config, recorder=recorder)


def run_ending(*, recorder, reason: str, detail: str) -> None:
    """The run ends in this transaction, before its open calls and its row are written."""
    for listener in _listeners["run_ending"]:
        listener(recorder=recorder, reason=reason, detail=detail)


def run_ended(*, run, fields: dict) -> None:
    """The run's ending `fields` are written in this transaction (it commits next)."""
    for listener in _listeners["run_ended"]:
        listener(run=run, fields=fields)


def records_committed(run, records: list, fields: dict) -> None:
    """Inside a recorder's transaction: the steps and calls it wrote and the run's fields it changed."""
    for listener in _listeners["records_committed"]:
        listener(run, records, fields)


def summary_added(*, run, step, tokens: int, cost_usd: float) -> None:
    """A stopped run's summary step was written (after the run had ended and been counted)."""
    for listener in _listeners["summary_added"]:
        listener(run=run, step=step, tokens=tokens, cost_usd=cost_usd)
