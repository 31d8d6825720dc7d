"""Decisions from chat: a Slack-compatible channel where waiting calls are posted with Approve /
Reject buttons, and where a click decides through the same service as the queue.

- When a call waits (gate.approval_request), a ChatMessage row is written in the loop's
  transaction and its posting queued after commit: the tool, the arguments with sensitive fields
  masked, their keyed hash, the run and its link, and the two buttons. With a bot token the
  message's id (`ts`) is kept, so it can be updated later; with only an incoming webhook it cannot.
- A click comes back to /chat/slack/interactions. `interaction_handle` checks Slack's v0
  signature over the raw body with the signing secret and refuses a timestamp older than
  SLACK_MAX_AGE_SECONDS (a replay), then maps the Slack member to an account (ChatIdentity, set by
  administrators) and decides through decide.approval_decide as that person, so every rule of the
  queue holds (role, group, quorum, launcher, two people). Every refusal (bad signature, old
  timestamp, unmapped member, a person without the right) is recorded in the audit log and, with
  a bot token, told to the person alone (an ephemeral message).
- The message then shows the outcome: "Approved by alice in Slack", or, when the call was
  decided anywhere else, "Approved by alice in the dashboard" (the sweep's `chat_sync`, every few
  seconds, updates the messages of calls decided since).
"""
import hashlib
import hmac
import json
import logging
import time
from urllib.parse import parse_qs

from django.conf import settings
from django.core.cache import cache

from accounts.models import ChatIdentity
from audit.models import AuditEntry
from audit.record import entry_write
from runs.models import Approval, ChatMessage
from runs.roles import PERM_DECIDE
from runs.supervision.approvals.checks import EditRefused, NotAllowed
from runs.supervision.approvals.decide import AlreadyDecided, approval_decide
from runs.supervision.chat.messages import APPROVE, REJECT, ChatError, outcome_show, outcome_words, slack_api
from toolsapp import net

log = logging.getLogger("runs.chat")
UNSIGNED_RECORD_SECONDS = 60


class Refused(Exception):
    """A click that decides nothing: its words are recorded, and told to the person when possible.
    `unsigned`: the request is not Slack's (a bad signature or timestamp): 401, and nobody is told."""

    def __init__(self, words: str, *, unsigned: bool = False):
        super().__init__(words)
        self.unsigned = unsigned


def signature_valid(*, body: bytes, timestamp: str, signature: str, secret: str) -> bool:
    """Slack's v0 scheme: v0= + HMAC-SHA256 of "v0:<timestamp>:<raw body>" with the signing secret."""
    expected = "v0=" + hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature or "")


def interaction_handle(*, body: bytes, timestamp: str, signature: str, address: str | None = None) -> tuple[int, str]:
    """One click from Slack: (HTTP status, what happened). Never raises for a bad request."""
    try:
        member, approval_id, approve, channel = _verified_click(body, timestamp, signature)
        identity = ChatIdentity.objects.select_related("user").filter(member_id=member).first()
        if identity is None or not identity.user.is_active:
            raise Refused(f"Slack member {member} is not mapped to an active account here")
        user = identity.user
        if not user.has_perm(PERM_DECIDE):
            raise Refused(f"{user.get_username()} may not decide destructive calls")
        try:
            approval = approval_decide(approval_id=approval_id, user=user, approve=approve,
                                       reason="" if approve else f"rejected in Slack by {user.get_username()}")
        except (NotAllowed, EditRefused) as exc:
            raise Refused(f"{user.get_username()}: {exc}") from None
        except AlreadyDecided as exc:
            _tell(channel, member, f"Nothing changed: {exc}.")
            return 200, str(exc)
        except Approval.DoesNotExist:
            raise Refused(f"approval {approval_id} does not exist") from None
    except Refused as exc:
        log.warning(json.dumps({"event": "chat_click_refused", "why": str(exc)[:300], "address": address}))
        # The endpoint is public: a request that is not Slack's is recorded once a minute per
        # address, so junk cannot fill the append-only log (the log line counts every one).
        if not exc.unsigned or cache.add(f"chat-unsigned:{address}", 1, UNSIGNED_RECORD_SECONDS):
            entry_write(action=AuditEntry.Action.CHAT_REFUSED, kind="chat decision", detail=str(exc), address=address,
                        via="chat")
        if exc.unsigned:
            return 401, str(exc)
        _tell_refused(body, str(exc))
        return 200, str(exc)
    message = ChatMessage.objects.filter(approval_id=approval.pk).select_related(
        "approval__run__agent", "approval__tool_call").first()
    if approval.status == Approval.Status.PENDING:
        words = f"{user.get_username()} approved ({approval.approvals_given} of {approval.required_approvals})"
        _tell(channel, member, f"Your approval counts: {approval.approvals_given} of {approval.required_approvals}.")
        return 200, words
    if message is not None:
        outcome_show(message, outcome_words(approval, where="in Slack"))
    return 200, outcome_words(approval, where="in Slack")


def _verified_click(body: bytes, timestamp: str, signature: str) -> tuple[str, int, bool, str]:
    secret = settings.SLACK_SIGNING_SECRET
    if not secret:
        raise Refused("bad signature: no SLACK_SIGNING_SECRET is configured", unsigned=True)
    try:
        age = time.time() - int(timestamp)
    except (TypeError, ValueError):
        raise Refused("bad timestamp: X-Slack-Request-Timestamp is missing or not a number", unsigned=True) from None
    if age > settings.SLACK_MAX_AGE_SECONDS:
        raise Refused(f"old timestamp: signed {int(age)} s ago (a replay?)", unsigned=True)
    # Signed ahead of our clock by more than the window: a click made to be replayed later.
    if -age > settings.SLACK_MAX_AGE_SECONDS:
        raise Refused(f"future timestamp: signed {int(-age)} s ahead of this server's clock", unsigned=True)
    if not signature_valid(body=body, timestamp=timestamp, signature=signature, secret=secret):
        raise Refused("bad signature: X-Slack-Signature does not match the body", unsigned=True)
    try:
        payload = json.loads(parse_qs(body.decode())["payload"][0])
        action = payload["actions"][0]
        member = str(payload["user"]["id"])
        approval_id = int(action["value"])
        decision = action["action_id"]
    except (KeyError, IndexError, TypeError, ValueError, UnicodeDecodeError):
        raise Refused("not a block action of an approval message") from None
    if decision not in (APPROVE, REJECT):
        raise Refused(f"unknown action {str(decision)[:40]!r}")
    channel = str((payload.get("channel") or {}).get("id", settings.SLACK_CHANNEL))
    return member, approval_id, decision == APPROVE, channel


def _tell_refused(body: bytes, words: str) -> None:
    try:
        payload = json.loads(parse_qs(body.decode())["payload"][0])
        _tell(str((payload.get("channel") or {}).get("id", settings.SLACK_CHANNEL)), str(payload["user"]["id"]),
              f"Not decided: {words}.")
    except (KeyError, IndexError, TypeError, ValueError, UnicodeDecodeError):
        return


def _tell(channel: str, member: str, text: str) -> None:
    """A message only `member` sees (bot token only); nothing when it cannot be sent."""
    if not settings.SLACK_BOT_TOKEN or not channel:
        return
    try:
        slack_api("chat.postEphemeral", {"channel": channel, "user": member, "text": text})
    except (net.OutboundError, net.Blocked, ChatError) as exc:
        log.warning(json.dumps({"event": "chat_ephemeral_failed", "error": str(exc)[:300]}))
