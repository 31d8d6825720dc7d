"""Handing runs to workers: after the transaction that made them ready commits."""
from django.db import transaction


def run_dispatch(*, run_id: int) -> None:
    from runs.tasks import advance_run

    transaction.on_commit(lambda: advance_run.delay(run_id))
