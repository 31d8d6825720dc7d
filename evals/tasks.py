from celery import shared_task


@shared_task(ignore_result=True, acks_late=True)
def score_case(run_id: int) -> None:
    """Score an experiment's case once its run ended (evals.scoring.case_score: idempotent)."""
    from evals.scoring import case_score

    case_score(run_id)
