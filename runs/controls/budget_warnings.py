"""A budget's warning at its alert share (80 % unless set), once a period: a webhook
"budget.warning" and an e-mail, sent by the periodic budget check (runs/tasks.py)."""
import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.controls.budgets import amount_text, budget_text, budgets_used, period_start
from runs.models import Budget, BudgetNotice

log = logging.getLogger("runs.budgets")


def budget_notices_send(*, now: datetime | None = None) -> list[BudgetNotice]:
    """Warn once per period for each budget past its alert share (80 % unless set): a webhook
    "budget.warning" and an e-mail to APPROVAL_ESCALATION_EMAILS, in the transaction that records
    the notice (a unique constraint makes concurrent checks harmless)."""
    from runs.notifications.webhooks import notify

    now = now or timezone.now()
    budgets = list(Budget.objects.filter(enabled=True).select_related("agent", "person"))
    if not budgets:
        return []
    used = budgets_used(budgets, now=now)
    sent = []
    for budget in budgets:
        start = period_start(budget.period, now)
        if used[budget.pk] < budget.alert_share * budget.limit or budget.limit <= 0:
            continue
        if BudgetNotice.objects.filter(budget=budget, period_start=start).exists():
            continue
        try:
            with transaction.atomic():
                notice = BudgetNotice.objects.create(budget=budget, period_start=start, used=used[budget.pk],
                                                     limit=budget.limit)
                notify("budget.warning", lambda: budget_warning_data(budget, notice), project_id=budget.project_id)
                transaction.on_commit(lambda b=budget, n=notice: _warning_mail(b, n))
        except IntegrityError:  # another worker sent it first
            continue
        sent.append(notice)
    return sent


def share_text(budget: Budget, notice: BudgetNotice) -> str:
    """ "Billing, $50 a day: $41.20 used (82 %)" """
    share = notice.used / notice.limit if notice.limit else 1
    return f"{budget_text(budget)}: {amount_text(budget.measure, notice.used)} used ({share:.0%})"


def budget_warning_data(budget: Budget, notice: BudgetNotice) -> dict:
    from django.conf import settings
    from django.urls import reverse

    return {"budget": {
        "id": budget.pk, "name": budget.name, "scope": budget.scope, "measure": budget.measure,
        "period": budget.period, "limit": budget.limit, "used": notice.used,
        "alert_share": budget.alert_share, "period_start": notice.period_start.isoformat(),
        "text": share_text(budget, notice), "url": settings.SITE_URL.rstrip("/") + reverse("budget_list"),
    }}


def _warning_mail(budget: Budget, notice: BudgetNotice) -> None:
    """The warning by e-mail, after its commit: to the agent's escalation addresses for an agent's
    budget, else APPROVAL_ESCALATION_EMAILS. A mail server that refuses it is logged, not retried
    (the webhook is the delivery that is retried)."""
    from django.conf import settings
    from django.core.mail import EmailMessage
    from django.urls import reverse

    from runs.supervision.approvals.escalation import escalation_recipients

    to = escalation_recipients(budget.agent) if budget.agent_id else list(settings.APPROVAL_ESCALATION_EMAILS)
    if not to:
        return
    text = share_text(budget, notice)
    body = "\n".join([
        f"Budget {text}.", "",
        f"At {budget.limit:g} the runs it covers pause before their next model request and wait in the",
        "approvals queue, where an administrator may raise it; new runs wait queued.", "",
        settings.SITE_URL.rstrip("/") + reverse("budget_list"),
    ])
    try:
        EmailMessage(subject=f"[Agentsite] Budget {text}", body=body, to=to,
                     headers={"X-Agentsite-Budget": str(budget.pk)}).send()
    except Exception as exc:  # the notice stays recorded: one warning a period, even when mail is down
        log.warning("could not send the warning of budget %s by e-mail: %s", budget.pk, exc)
