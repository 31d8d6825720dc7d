"""Handing work to workers: after the transaction that made it ready commits."""
import logging

from celery import current_app
from django.db import transaction
from django.utils import timezone

from runs.models import Run

log = logging.getLogger("runs.services.dispatch")  # its name from before the move: operators filter on it


def run_dispatch(*, run_id: int) -> None:
    # The sweep sends a queued run again RUN_REQUEUE_AFTER_SECONDS after this, if no worker took it.
    Run.objects.filter(pk=run_id).update(dispatched_at=timezone.now())
    transaction.on_commit(lambda: _send(run_id))


def task_send(name: str, *args) -> None:
    """Queue the task registered as `name` now; raises when the broker is away.

    Tasks are looked up by name in Celery's registry, so that services never import the tasks
    module (which imports services).
    """
    current_app.tasks[name].delay(*args)


def run_send(run_id: int) -> None:
    """Hand a run to the workers now (after the commit that made it ready, with its dispatched_at set)."""
    _send(run_id)


def _send(run_id: int) -> None:
    try:
        task_send("runs.tasks.advance_run", run_id)
    except Exception as exc:
        # Redis is down: the change is committed, and the periodic sweep hands the run out
        # once the broker is back. Never fail the request that made the run ready.
        log.warning("could not enqueue run %s (%s); the sweep will hand it out", run_id, exc)
