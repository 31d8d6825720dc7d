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


@shared_task(ignore_result=True, bind=True, max_retries=5)
def send_webhook(self, url: str, event: str, body: dict) -> None:
    from runs.services.notifications import webhook_send
    from toolsapp.net import Blocked, OutboundError

    try:
        webhook_send(url=url, event=event, body=body)
    except Blocked as exc:  # configuration error: retrying cannot help
        log.error("webhook %s to %s refused: %s", event, url, exc)
    except OutboundError as exc:
        raise self.retry(exc=exc, countdown=min(300, 5 * 2**self.request.retries)) from None


@shared_task(ignore_result=True)
def check_budget_alerts() -> None:
    from runs.services.budget_alerts import budget_alerts_check

    budget_alerts_check()
