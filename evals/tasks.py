from celery import shared_task

# A run that ended while its summary is asked for is scored once the summary is in (or failed):
# the task looks again every few seconds, for as long as a summary may take.
SUMMARY_WAIT_SECONDS = 3
SUMMARY_WAIT_TRIES = 200


@shared_task(ignore_result=True, acks_late=True, bind=True, max_retries=SUMMARY_WAIT_TRIES)
def score_case(self, run_id: int) -> None:
    """Score an experiment's case once its run ended (evals.scoring.case_score: idempotent)."""
    from evals.scoring import case_score, score_pending

    if case_score(run_id) is None and score_pending(run_id):
        raise self.retry(countdown=SUMMARY_WAIT_SECONDS)
