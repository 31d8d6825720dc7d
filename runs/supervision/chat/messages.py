"""Decisions from chat, the channel's side: an approval's message posted when its call waits,
and updated with the outcome however it is decided (runs/supervision/chat/clicks.py has the clicks).

With a bot token the message's id (`ts`) is kept, so it can be updated later; with only an
incoming webhook it cannot. The sweep's `chat_sync`, every few seconds, posts messages whose task
was lost and shows the outcome of calls decided since ("Approved by alice in the dashboard")."""
import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from projects.models import Project
from runs.engine.dispatch import task_send
from runs.models import Agent, Approval, ChatMessage
from runs.supervision.approvals.escalation import masked_arguments_text
from runs.supervision.evidence.text import evidence_read, evidence_sections, section_text
from toolsapp import net
from toolsapp.models import Tool

log = logging.getLogger("runs.chat")
POST_TASK = "runs.tasks.chat_post"
ARGUMENTS_CHARS = 2500  # of the masked arguments in one message; the dashboard shows all
# Of one part of the evidence, in one block: Slack refuses a section's text over 3,000 characters.
EVIDENCE_CHARS = 2800
RESEND_AFTER = timedelta(seconds=30)
CLAIM_TIMEOUT = timedelta(seconds=60)  # a claim older than this was its process's last act
MAX_ATTEMPTS = 5
SYNC_PER_SWEEP = 20  # Slack requests in one sweep at most twice this: the sweep has other work
APPROVE, REJECT = "approve", "reject"


def chat_configured() -> bool:
    # With a bot token, a project's own channel is enough (projects.Project.chat_channel).
    return bool(settings.SLACK_BOT_TOKEN or settings.SLACK_WEBHOOK_URL)


def _channel(approval: Approval) -> str:
    """Where the call is posted: its project's channel, else SLACK_CHANNEL ("" with a webhook only)."""
    if not settings.SLACK_BOT_TOKEN:
        return settings.SLACK_CHANNEL
    own = (Project.objects.filter(pk__in=Agent.objects.filter(pk=approval.run.agent_id).values("project_id"))
           .values_list("chat_channel", flat=True).first())
    return own or settings.SLACK_CHANNEL


# --- posting and updating -------------------------------------------------------------------------


def chat_request(approval: Approval) -> None:
    """In the transaction that asks about the call: its message, posted once that commits."""
    if not chat_configured():
        return
    channel = _channel(approval)
    if settings.SLACK_BOT_TOKEN and not channel and not settings.SLACK_WEBHOOK_URL:
        return  # a bot, and no channel for this project nor the site's: nowhere to post
    message = ChatMessage.objects.create(approval=approval, channel=channel)
    transaction.on_commit(lambda: _send_later(message.pk))


def _send_later(message_id: int) -> None:
    try:
        task_send(POST_TASK, message_id)
    except Exception:  # the broker is away: the sweep posts it (chat_sync)
        log.warning(json.dumps({"event": "chat_post_not_queued", "message": message_id}))


def chat_post(*, message_id: int) -> None:
    """Post one waiting call's message (a task, or the sweep for a lost one). Claimed first by a
    conditional UPDATE, so the task and a sweep, or two sweeps, never both post it; a claim whose
    process died is taken again after CLAIM_TIMEOUT."""
    now = timezone.now()
    Status = ChatMessage.Status
    claimable = Q(status=Status.PENDING) | Q(status=Status.POSTING, claimed_at__lte=now - CLAIM_TIMEOUT)
    if not ChatMessage.objects.filter(claimable, pk=message_id).update(
            status=Status.POSTING, claimed_at=now, attempts=F("attempts") + 1):
        return
    message = ChatMessage.objects.select_related("approval__run__agent", "approval__tool_call").get(pk=message_id)
    approval = message.approval
    payload = {"text": _summary(approval), "blocks": message_blocks(approval)}
    try:
        if settings.SLACK_BOT_TOKEN and message.channel:
            answer = slack_api("chat.postMessage", {"channel": message.channel, **payload})
            fields = {"channel": answer.get("channel", message.channel), "ts": answer.get("ts", "")}
        else:
            _post(settings.SLACK_WEBHOOK_URL, payload)
            fields = {}
    except (net.OutboundError, net.Blocked, ChatError) as exc:
        failed = message.attempts >= MAX_ATTEMPTS
        ChatMessage.objects.filter(pk=message.pk, status=Status.POSTING, claimed_at=now).update(
            last_error=str(exc)[:500], status=Status.FAILED if failed else Status.PENDING)
        log.warning(json.dumps({"event": "chat_post_failed", "message": message.pk, "error": str(exc)[:300]}))
        return
    ChatMessage.objects.filter(pk=message.pk, status=Status.POSTING, claimed_at=now).update(
        status=Status.POSTED, last_error="", attempts=0, **fields)


def chat_sync(*, limit: int = SYNC_PER_SWEEP) -> int:
    """The sweep's part: post messages whose task was lost, and show the outcome on the messages
    of calls decided since (wherever they were decided). Returns how many messages changed."""
    if not chat_configured():
        return 0
    now = timezone.now()
    Status = ChatMessage.Status
    stale = list(ChatMessage.objects.filter(
        Q(status=Status.PENDING, created_at__lte=now - RESEND_AFTER)
        | Q(status=Status.POSTING, claimed_at__lte=now - CLAIM_TIMEOUT)
    ).order_by("pk").values_list("pk", flat=True)[:limit])
    for message_id in stale:
        chat_post(message_id=message_id)
    decided = (ChatMessage.objects.filter(status=Status.POSTED, outcome_shown="")
               .exclude(approval__status=Approval.Status.PENDING).exclude(ts="").order_by("pk")
               .select_related("approval__run__agent", "approval__tool_call")[:limit])
    changed = 0
    for message in decided:
        changed += outcome_show(message, outcome_words(message.approval, where="in the dashboard"))
    return changed + len(stale)


def outcome_show(message: ChatMessage, words: str) -> int:
    """Replace the buttons by the outcome (bot token only: a webhook's message has no id)."""
    if not (settings.SLACK_BOT_TOKEN and message.ts):
        return 0
    if not ChatMessage.objects.filter(pk=message.pk, outcome_shown="").update(outcome_shown=words[:300]):
        return 0  # shown already (by the click, or another sweep)
    try:
        slack_api("chat.update", {"channel": message.channel, "ts": message.ts, "text": words,
                             "blocks": message_blocks(message.approval, outcome=words)})
    except (net.OutboundError, net.Blocked, ChatError) as exc:
        # Tried again by the next sweeps, MAX_ATTEMPTS times: a message deleted in Slack, or a bot
        # removed from the channel, would otherwise be tried every few seconds for ever.
        given_up = message.attempts + 1 >= MAX_ATTEMPTS
        ChatMessage.objects.filter(pk=message.pk).update(
            outcome_shown=f"(not shown: {exc})"[:300] if given_up else "", attempts=F("attempts") + 1,
            last_error=str(exc)[:500])
        return 0
    return 1


def outcome_words(approval: Approval, *, where: str) -> str:
    """ "Approved by alice in Slack at 12:03 UTC", "Expired at …", "Closed: the run ended"."""
    when = f" at {approval.decided_at:%Y-%m-%d %H:%M} UTC" if approval.decided_at else ""
    if approval.status == Approval.Status.EXPIRED:
        return f"Expired{when}: nobody decided in time (counts as a rejection)"
    if approval.status == Approval.Status.CLOSED:
        return f"Closed{when}: the run ended before anyone decided"
    verb = "Approved" if approval.status == Approval.Status.APPROVED else "Rejected"
    by = approval.decider
    place = f" {where}" if approval.decided_by_name else ""
    reason = f": {approval.reason}" if approval.status == Approval.Status.REJECTED and approval.reason else ""
    return f"{verb} by {by}{place}{when}{reason}"


def _summary(approval: Approval) -> str:
    return f"{approval.tool_call.tool_name} in run #{approval.run_id} waits for a decision"


def message_blocks(approval: Approval, *, outcome: str = "") -> list[dict]:
    """The message: what is asked, with masked arguments and their hash, the call's evidence as
    the queue's card tells it (runs/supervision/evidence/text.py); the buttons while it waits."""
    call, run = approval.tool_call, approval.run
    tool = Tool.objects.filter(name=call.tool_name).values_list("sensitive_fields", flat=True).first() or []
    arguments = masked_arguments_text(call.arguments, list(tool))
    if len(arguments) > ARGUMENTS_CHARS:
        arguments = arguments[:ARGUMENTS_CHARS] + "\n…"
    link = settings.SITE_URL.rstrip("/") + reverse("approval_detail", args=[approval.pk])
    needs = f"{approval.required_approvals} approvals from different people" if approval.required_approvals > 1 else ""
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": (
            f"*{_plain(call.tool_name)}* waits for a decision in run #{run.pk} (agent {_plain(run.agent.name)})"
            + (f"\nNeeds {needs}" if needs else "") + f"\n```{_plain(arguments)}```")}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": (
            f"Argument hash `{call.args_hash[:16]}` · <{link}|Open it in the dashboard>")}]},
        *evidence_blocks(approval, sensitive_fields=list(tool)),
    ]
    if outcome:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*{_plain(outcome)}*"}})
        return blocks
    blocks.append({"type": "actions", "block_id": f"approval-{approval.pk}", "elements": [
        {"type": "button", "action_id": APPROVE, "style": "primary", "value": str(approval.pk),
         "text": {"type": "plain_text", "text": "Approve"}},
        {"type": "button", "action_id": REJECT, "style": "danger", "value": str(approval.pk),
         "text": {"type": "plain_text", "text": "Reject"}},
    ]})
    return blocks


def evidence_blocks(approval: Approval, *, sensitive_fields: list[str]) -> list[dict]:
    """Each part of the evidence as a block: its title (the product's words, bold), then its
    lines as plain text, never read as Slack's markup (a result or the model's words cannot
    format, link or mention anyone). Nothing for a call asked before evidence was kept."""
    evidence = evidence_read(approval, sensitive_fields=sensitive_fields)
    if evidence is None:
        return []
    blocks = []
    for section in evidence_sections(evidence, now=timezone.now()):
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"*{_plain(section.title)}*"}]})
        blocks.append({"type": "section", "text": {"type": "plain_text", "emoji": False,
                                                   "text": section_text(section, limit=EVIDENCE_CHARS)}})
    return blocks


def chat_evidence_refresh(*, approval_id: int) -> int:
    """Show a waiting call's evidence again on its message (bot token only), once its state check
    has answered: the message was posted when the call was asked, before the check ran. Returns 1
    when the message changed. A decision shown meanwhile is shown again, so the buttons never
    come back on a decided call."""
    if not settings.SLACK_BOT_TOKEN:
        return 0
    message = (ChatMessage.objects.filter(approval_id=approval_id, status=ChatMessage.Status.POSTED, outcome_shown="",
                                          approval__status=Approval.Status.PENDING).exclude(ts="")
               .select_related("approval__run__agent", "approval__tool_call").first())
    if message is None:
        return 0
    approval = message.approval
    try:
        slack_api("chat.update", {"channel": message.channel, "ts": message.ts, "text": _summary(approval),
                                  "blocks": message_blocks(approval)})
    except (net.OutboundError, net.Blocked, ChatError) as exc:
        log.warning(json.dumps({"event": "chat_evidence_not_shown", "message": message.pk, "error": str(exc)[:300]}))
        return 0
    shown = ChatMessage.objects.filter(pk=message.pk).values_list("outcome_shown", flat=True).first()
    if shown and not shown.startswith("(not shown"):
        try:  # decided while this update was on its way: the outcome again, last
            slack_api("chat.update", {"channel": message.channel, "ts": message.ts, "text": shown,
                                      "blocks": message_blocks(approval, outcome=shown)})
        except (net.OutboundError, net.Blocked, ChatError):
            ChatMessage.objects.filter(pk=message.pk, outcome_shown=shown).update(outcome_shown="")  # the sweep retries
    return 1


def _plain(text: str) -> str:
    """Text shown as itself in Slack's markup (its three control characters escaped)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class ChatError(Exception):
    """Slack answered, but with ok: false."""


def slack_api(method: str, body: dict) -> dict:
    response = net.post_bytes(
        f"{settings.SLACK_API_URL}/{method}", net.encode_json(body), timeout=settings.WEBHOOK_TIMEOUT_SECONDS,
        headers={"Authorization": f"Bearer {settings.SLACK_BOT_TOKEN}", "Content-Type": "application/json; charset=utf-8"},
        max_bytes=256 * 1024, secrets=(settings.SLACK_BOT_TOKEN,),
    )
    if response.status >= 400:
        raise net.OutboundError(f"{method}: HTTP {response.status}")
    answer = response.json()
    if not isinstance(answer, dict) or not answer.get("ok"):
        raise ChatError(f"{method}: {(answer or {}).get('error', 'not ok') if isinstance(answer, dict) else 'not ok'}")
    return answer


def _post(url: str, body: dict) -> None:
    response = net.post_bytes(url, net.encode_json(body), timeout=settings.WEBHOOK_TIMEOUT_SECONDS,
                              max_bytes=64 * 1024, secrets=(url,))
    if response.status >= 400:
        raise net.OutboundError(f"the incoming webhook answered HTTP {response.status}")
