"""Escalation: an approval that waits past its threshold tells someone, once.

The sweep (runs/lifecycle/housekeeping.py) calls `approvals_escalate` every few seconds. An approval
is due when it is still pending and its `escalate_at` (set when it was asked: requested_at plus
its rule's escalate_after_seconds, else its agent's) has passed. Each one is claimed by one
conditional UPDATE setting `escalated_at`, so two sweeps running at once never escalate it twice.

The webhook ("approval.escalated") is a WebhookDelivery row written in the claim's transaction:
at least once, retried like every webhook. The e-mail is sent after the claim commits, at most
once: when the mail server refuses or cannot be reached it is logged and not tried again (the
webhook is the channel that retries; an e-mail retried after a timeout could reach people twice).

Neither carries a raw secret: the e-mail shows the arguments with the tool's sensitive fields
masked, and the call's evidence as stored (masked when it was written: runs/supervision/evidence/text.py), and
the webhook only their keyed hash. The link opens the queue item; it holds no token,
so it needs a signed-in person with the right to see approvals, and opening it decides nothing.
"""
import json
import logging
import smtplib
from datetime import datetime

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from hosting.text import loads as bounded_loads
from runs.models import Approval
from runs.notifications.webhooks import approval_pending_data, notify
from runs.supervision.evidence.text import age_text, evidence_plain, evidence_read, evidence_sections
from runs.supervision.queue.argument_lines import argument_lines
from toolsapp.models import Tool
from toolsapp.sensitive import MASK

log = logging.getLogger("runs.services.escalation")  # its name from before the move: operators filter on it

ESCALATIONS_PER_SWEEP = 100  # the rest wait for the next sweep, a few seconds later
ARGUMENTS_MAX_CHARS = 8000  # of the pretty-printed arguments in one e-mail; the page shows all
EVIDENCE_MAX_CHARS = 8000  # of the evidence (runs/supervision/evidence/text.py) in one e-mail; the page shows all


def approval_link(approval_id: int) -> str:
    """The queue item's address, for people: SITE_URL + /approvals/<id>/."""
    return settings.SITE_URL.rstrip("/") + reverse("approval_detail", args=[approval_id])


def escalation_recipients(agent) -> list[str]:
    """The agent's escalation_emails (comma separated), else APPROVAL_ESCALATION_EMAILS."""
    own = [address.strip() for address in (agent.escalation_emails or "").split(",") if address.strip()]
    return own or list(settings.APPROVAL_ESCALATION_EMAILS)


def masked_arguments_text(arguments: str, sensitive_fields: list[str]) -> str:
    """The call's arguments pretty-printed with sensitive fields as MASK, as the queue shows them."""
    try:
        parsed = bounded_loads(arguments or "{}")
    except ValueError:
        if sensitive_fields:
            return "(not valid JSON; hidden because this tool has sensitive fields)"
        text = arguments
    else:
        lines = argument_lines(parsed, sensitive_fields=sensitive_fields, unseen=lambda key, value: [])
        text = "\n".join(f"{l.indent}{l.key + ': ' if l.key else ''}{l.text}{',' if l.comma else ''}" for l in lines)
    if len(text) > ARGUMENTS_MAX_CHARS:
        text = text[:ARGUMENTS_MAX_CHARS] + f"\n… (cut at {ARGUMENTS_MAX_CHARS} of {len(text)} characters; the page shows all)"
    return text


def _one_line(text: str, limit: int = 100) -> str:
    return " ".join(str(text).split())[:limit]  # a header cannot hold a line break


def escalation_email(approval: Approval, *, now: datetime, sensitive_fields: list[str]) -> EmailMessage | None:
    """The e-mail for one escalated approval; None when nobody is to be told."""
    waited = age_text((now - approval.requested_at).total_seconds())
    return approval_email(
        approval, now=now, sensitive_fields=sensitive_fields,
        headline=f"A destructive call has waited {waited} for a decision.",
        subject=f"Waiting {waited}: {_one_line(approval.tool_call.tool_name)} in run #{approval.run_id}",
    )


def approval_email(
    approval: Approval, *, now: datetime, sensitive_fields: list[str], headline: str, subject: str,
) -> EmailMessage | None:
    """An e-mail about one waiting approval to its agent's escalation addresses: `headline`, then
    the call's facts, masked arguments and evidence, then its link; None when nobody is to be told."""
    recipients = escalation_recipients(approval.run.agent)
    if not recipients:
        return None
    call, run = approval.tool_call, approval.run
    waited = age_text((now - approval.requested_at).total_seconds())
    tool = _one_line(call.tool_name)
    needs = f"{approval.required_approvals} approvals from different people ({approval.approvals_given} given)" \
        if approval.required_approvals > 1 else "one approval"
    facts = [
        ("Tool", tool),
        ("Run", f"#{run.pk}, agent {run.agent.name}" + (f", customer {run.customer}" if run.customer else "")),
        ("Requested", f"{approval.requested_at:%Y-%m-%d %H:%M:%S} UTC"),
        ("Waiting", waited),
        *([("Expires", f"{approval.expires_at:%Y-%m-%d %H:%M:%S} UTC")] if approval.expires_at else []),
        ("Needs", needs + (f", members of {approval.group.name}" if approval.group_id else "")),
    ]
    if approval.rule_name:
        facts.append(("Asked by", f"rule {approval.rule_name!r} v{approval.rule_version}"))
    if approval.note:
        facts.append(("Note", approval.note))
    facts.append(("Argument hash", call.args_hash))
    body = "\n".join([
        headline,
        "",
        *(f"{label + ':':<15}{value}" for label, value in facts),
        "",
        f"Arguments (sensitive fields shown as {MASK}):",
        masked_arguments_text(call.arguments, sensitive_fields),
        "",
        *_evidence_paragraphs(approval, now=now, sensitive_fields=sensitive_fields),
        "Open it to decide (sign-in required; the link alone decides nothing):",
        approval_link(approval.pk),
    ])
    return EmailMessage(
        subject=f"[Agentsite] {subject}",
        body=body,
        to=recipients,
        headers={"X-Agentsite-Approval": str(approval.pk)},
    )


def _evidence_paragraphs(approval: Approval, *, now: datetime, sensitive_fields: list[str]) -> list[str]:
    """The call's evidence as the queue's card tells it (runs/supervision/evidence/text.py); nothing for a call
    asked before evidence was kept."""
    evidence = evidence_read(approval, sensitive_fields=sensitive_fields)
    if evidence is None:
        return []
    return [evidence_plain(evidence_sections(evidence, now=now), limit=EVIDENCE_MAX_CHARS), ""]


def approval_escalated_data(approval: Approval, *, now: datetime) -> dict:
    """The webhook body: approval.pending's, with the wait, the rule and the item's own link."""
    data = approval_pending_data(approval)
    data["approval"].update({
        "escalated_at": now.isoformat(),
        "waited_seconds": round((now - approval.requested_at).total_seconds(), 1),
        "rule": approval.rule_name or None,
        "rule_version": approval.rule_version,
        "required_approvals": approval.required_approvals,
        "approvals_given": approval.approvals_given,
        "url": approval_link(approval.pk),
    })
    return data


def approvals_escalate(*, limit: int = ESCALATIONS_PER_SWEEP) -> list[int]:
    """Escalate the pending approvals whose escalate_at has passed; returns their ids."""
    now = timezone.now()
    due = list(
        Approval.objects.filter(status=Approval.Status.PENDING, escalate_at__lte=now, escalated_at__isnull=True)
        .order_by("escalate_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )
    escalated: list[Approval] = []
    for approval_id in due:
        with transaction.atomic():
            # The claim: decided meanwhile, or taken by another sweep -> nothing to do.
            if not Approval.objects.filter(
                pk=approval_id, status=Approval.Status.PENDING, escalated_at__isnull=True
            ).update(escalated_at=now):
                continue
            approval = Approval.objects.select_related("run", "run__agent", "tool_call", "group").get(pk=approval_id)
            notify("approval.escalated", lambda approval=approval: approval_escalated_data(approval, now=now),
                   project_id=approval.run.agent.project_id)
        escalated.append(approval)
    if escalated:
        escalation_emails_send(escalated, now=now)
    return [approval.pk for approval in escalated]


def escalation_emails_send(approvals: list[Approval], *, now: datetime, build=escalation_email) -> int:
    """Send each approval's e-mail (made by `build`) over one connection; returns how many were
    sent. Failures are logged (ids and the error, never arguments) and not retried; they never
    fail the sweep."""
    sensitive = dict(
        Tool.objects.filter(name__in={a.tool_call.tool_name for a in approvals}).values_list("name", "sensitive_fields")
    )
    messages = []
    for approval in approvals:
        message = build(approval, now=now, sensitive_fields=sensitive.get(approval.tool_call.tool_name) or [])
        if message is not None:
            messages.append((approval, message))
    if not messages:
        return 0
    sent = 0
    connection = get_connection()  # SMTP: each step waits at most EMAIL_TIMEOUT seconds
    try:
        connection.open()
        for n, (approval, message) in enumerate(messages):
            message.connection = connection
            try:
                sent += message.send()
            except (smtplib.SMTPResponseException, smtplib.SMTPRecipientsRefused, ValueError) as exc:
                _log_unsent([approval], exc)  # this message refused: the others may still go
            except Exception as exc:  # the connection is gone: the rest would each wait out the timeout
                _log_unsent([a for a, _ in messages[n:]], exc)
                break
    except Exception as exc:
        _log_unsent([a for a, _ in messages], exc)
    finally:
        try:
            connection.close()
        except Exception:  # closing a broken connection: nothing left to lose
            pass
    return sent


def _log_unsent(approvals: list[Approval], exc: Exception) -> None:
    log.error(json.dumps({
        "event": "escalation_email_not_sent",
        "approvals": [a.pk for a in approvals],
        "error": f"{type(exc).__name__}: {exc}"[:500],
    }))
