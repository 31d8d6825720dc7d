"""Daily budget alerts: an agent whose runs used more tokens or cost than its threshold today.

Checked by a periodic task (CELERY_BEAT_SCHEDULE, every BUDGET_ALERT_INTERVAL_SECONDS), not in the
loop, so iterations pay nothing for it. A run counts toward the UTC day it was created, with what
it did itself (runs/observability/metrics/own_work.py: a fork's copies of its parent's work are the parent's). One alert
per agent, day and kind (a unique constraint makes concurrent checks harmless); each new alert is
logged, shown on the metrics page and sent to the webhooks.
"""
import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q, Sum
from django.utils import timezone

from runs.days import day_of, day_start
from runs.models import Agent, BudgetAlert, Run
from runs.notifications.webhooks import budget_alert_data, notify
from runs.observability.metrics import own_work

log = logging.getLogger("runs.services.budget_alerts")  # its name from before the move: operators filter on it


def budget_alerts_check(*, now: datetime | None = None) -> list[BudgetAlert]:
    """Create (and notify) the alerts crossed today that do not exist yet."""
    now = now or timezone.now()
    day = day_of(now)  # the site's day, as the metrics page counts it
    watched = Agent.objects.filter(Q(daily_token_alert__isnull=False) | Q(daily_cost_alert_usd__isnull=False))
    usage = {
        row["agent_id"]: row
        for row in Run.production.filter(agent__in=watched, created_at__gte=day_start(day))
        .values("agent_id")
        .annotate(tokens=Sum(own_work.own_tokens()), cost=Sum(own_work.own_cost()))
    }
    existing = set(BudgetAlert.objects.filter(day=day).values_list("agent_id", "kind"))
    created = []
    for agent in watched:
        used = usage.get(agent.pk)
        if not used:
            continue
        crossed = []
        if agent.daily_token_alert is not None and (used["tokens"] or 0) > agent.daily_token_alert:
            crossed.append((BudgetAlert.Kind.TOKENS, agent.daily_token_alert, used["tokens"] or 0))
        if agent.daily_cost_alert_usd is not None and (used["cost"] or 0) > agent.daily_cost_alert_usd:
            crossed.append((BudgetAlert.Kind.COST, agent.daily_cost_alert_usd, float(used["cost"] or 0)))
        for kind, threshold, observed in crossed:
            if (agent.pk, kind) in existing:
                continue
            try:
                with transaction.atomic():
                    alert = BudgetAlert.objects.create(
                        agent=agent, day=day, kind=kind, threshold=threshold, observed=observed
                    )
                    notify("budget.alert", budget_alert_data(alert), project_id=agent.project_id)
            except IntegrityError:  # another worker created it first
                continue
            log.warning(
                "budget alert: agent %s used %s %s today, above its threshold of %s",
                agent.name, observed, kind, threshold,
            )
            created.append(alert)
    return created
