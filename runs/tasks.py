"""Celery tasks: thin wrappers that pass ids to services."""
from celery import shared_task


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def advance_run(run_id: int) -> None:
    from runs.services.loop import run_advance

    run_advance(run_id=run_id)


@shared_task(ignore_result=True)
def sweep_runs() -> None:
    from runs.services.housekeeping import runs_sweep

    runs_sweep()


@shared_task(ignore_result=True)
def prune_runs() -> None:
    from django.conf import settings

    from runs.services.housekeeping import runs_prune

    if settings.RUN_RETENTION_DAYS:
        runs_prune(days=settings.RUN_RETENTION_DAYS)
