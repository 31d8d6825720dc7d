"""Handing runs to workers: after the transaction that made them ready commits."""
import logging

from django.db import transaction

log = logging.getLogger(__name__)


def run_dispatch(*, run_id: int) -> None:
    transaction.on_commit(lambda: _send(run_id))


def _send(run_id: int) -> None:
    from runs.tasks import advance_run

    try:
        advance_run.delay(run_id)
    except Exception as exc:
        # Redis is down: the change is committed, and the periodic sweep hands the run out
        # once the broker is back. Never fail the request that made the run ready.
        log.warning("could not enqueue run %s (%s); the sweep will hand it out", run_id, exc)
