"""Celery tasks: thin wrappers that pass ids to services."""
import logging

from celery import shared_task

log = logging.getLogger(__name__)


# Early acknowledgement, on purpose. A run's durability comes from the database: the run is
# driven under a lease, every iteration is committed, and the periodic sweep hands a run whose
# worker died to another worker (ending it as worker_lost after RUN_MAX_TAKEOVERS). Late
# acknowledgement would add nothing on Redis (an unacked message only returns after the
# visibility timeout, an hour), and with Celery 5.7 a late ack after a Redis restart kills the
# worker (AttributeError in kombu's _connparams), taking every run in flight with it.
@shared_task(acks_late=False, ignore_result=True)
def advance_run(run_id: int) -> None:
    from runs.engine.loop import run_advance

    run_advance(run_id=run_id)


@shared_task(ignore_result=True)
def sweep_runs() -> None:
    from runs.lifecycle.housekeeping import runs_sweep

    runs_sweep()


@shared_task(acks_late=False, ignore_result=True)  # a lost message is posted by the sweep
def chat_post(message_id: int) -> None:
    from runs.supervision.chat.messages import chat_post as post

    post(message_id=message_id)


@shared_task(ignore_result=True)
def prune_runs() -> None:
    from django.conf import settings

    from runs.lifecycle.housekeeping import runs_prune

    if settings.RUN_RETENTION_DAYS:
        runs_prune(days=settings.RUN_RETENTION_DAYS)


# The delivery is a row written with its event; this task only sends it and records the outcome.
# Retries go through Celery (with the backoff the service says); if this task is lost, the sweep
# queues the row again, so no retry limit is needed here (the row counts its attempts).
@shared_task(ignore_result=True, bind=True, max_retries=None)
def send_webhook(self, delivery_id: int) -> None:
    from runs.notifications.webhooks import webhook_deliver

    wait = webhook_deliver(delivery_id=delivery_id)
    if wait is not None:
        raise self.retry(countdown=wait)


@shared_task(ignore_result=True)
def check_budget_alerts() -> None:
    from runs.controls.budget_warnings import budget_notices_send
    from runs.observability.metrics.budget_alerts import budget_alerts_check

    budget_alerts_check()
    budget_notices_send()


@shared_task(ignore_result=True)
def build_rollups() -> None:
    from runs.observability.metrics.rollups import build_pending

    build_pending()


# A read before a person decides (runs/supervision/evidence/state_checks.py): a lost one is asked again
# when its card is opened, so nothing retries it here.
@shared_task(acks_late=False, ignore_result=True)
def state_check_run(approval_id: int) -> None:
    from runs.supervision.evidence.state_checks import state_check_run as run_check

    run_check(approval_id=approval_id)
