from celery import shared_task


@shared_task(acks_late=True, ignore_result=True)
def advance_run(run_id: int) -> None:
    from runs.services.loop import run_advance

    run_advance(run_id=run_id)
