"""Decisions from chat, against a local server that speaks Slack's documented protocol
(chat.postMessage, chat.update, chat.postEphemeral, an incoming webhook; Slack itself cannot be
reached here): a waiting call is posted with masked arguments and buttons, a signed click decides
it as the mapped account through the queue's own service, the message shows the outcome wherever
it was decided, and every bad click is refused and recorded."""
import hashlib
import hmac
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from accounts.models import ChatIdentity
from audit.models import AuditEntry
from runs.lifecycle.housekeeping import runs_sweep
from runs.models import Approval, ChatMessage
from runs.supervision.approvals.decide import approval_decide
from tests.notifications.test_notifications import eager_tasks  # noqa: F401 (fixture)
from tests.support.approval_fixtures import make_user, pending_approval
from toolsapp.models import Tool

TOKEN, SECRET, CHANNEL = "xoxb-test-token", "signing-secret", "C0APPROVALS"
TASK, SECRET_REASON = "Please cancel order ORD-1001, the customer asked.", "Customer asked to cancel"


class FakeSlack:
    """Slack's Web API methods we use, and an incoming webhook; keeps every request."""

    def __init__(self):
        self.calls: list[tuple[str, dict, str]] = []  # (method or "webhook", body, authorization)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                method = self.path.rsplit("/", 1)[-1]
                fake.calls.append((method, body, self.headers.get("Authorization", "")))
                if method == "hook":
                    answer = b"ok"
                elif self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    answer = json.dumps({"ok": False, "error": "invalid_auth"}).encode()
                else:
                    answer = json.dumps({"ok": True, "channel": body.get("channel"), "ts": "1733300000.000100"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, method: str) -> list[dict]:
        return [body for name, body, _ in self.calls if name == method]

    def stop(self):
        self.server.shutdown()


@pytest.fixture
def slack(settings, eager_tasks):  # noqa: F811 (the fixture imported above)
    fake = FakeSlack()
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{fake.port}"]
    settings.SLACK_API_URL = f"http://127.0.0.1:{fake.port}/api"
    settings.SLACK_BOT_TOKEN, settings.SLACK_CHANNEL, settings.SLACK_SIGNING_SECRET = TOKEN, CHANNEL, SECRET
    settings.SITE_URL = "https://agents.example.com"
    yield fake
    fake.stop()


@pytest.fixture
def waiting(launch, slack):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    return pending_approval(launch(TASK))


def click(approval_id, member, action="approve", *, age=0, secret=SECRET, body=None, address="127.0.0.1"):
    payload = {"type": "block_actions", "user": {"id": member}, "channel": {"id": CHANNEL},
               "actions": [{"action_id": action, "value": str(approval_id)}]}
    raw = body or urlencode({"payload": json.dumps(payload)}).encode()
    timestamp = str(int(time.time()) - age)
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{timestamp}:".encode() + raw, hashlib.sha256).hexdigest()
    return Client().post("/chat/slack/interactions", raw, content_type="application/x-www-form-urlencoded",
                         HTTP_X_SLACK_REQUEST_TIMESTAMP=timestamp, HTTP_X_SLACK_SIGNATURE=signature,
                         REMOTE_ADDR=address)


def mapped(name, group, member):
    user = make_user(name, group)
    ChatIdentity.objects.create(user=user, member_id=member)
    return user


def test_a_waiting_call_is_posted_with_masked_arguments_hash_run_and_buttons(waiting, slack):
    [posted] = slack.of("chat.postMessage")
    assert posted["channel"] == CHANNEL
    text = json.dumps(posted, ensure_ascii=False)
    assert "cancel_order" in text and f"run #{waiting.run_id}" in text and waiting.tool_call.args_hash[:16] in text
    assert '\\"order_id\\": \\"ORD-1001\\"' in text and SECRET_REASON not in text and "••••" in text
    assert f"https://agents.example.com/approvals/{waiting.pk}/" in text
    [actions] = [b for b in posted["blocks"] if b["type"] == "actions"]
    assert [(e["action_id"], e["value"]) for e in actions["elements"]] == [("approve", str(waiting.pk)),
                                                                          ("reject", str(waiting.pk))]
    message = ChatMessage.objects.get(approval=waiting)
    assert (message.status, message.ts, message.channel) == ("posted", "1733300000.000100", CHANNEL)
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in slack.calls)


def test_a_signed_click_decides_as_the_mapped_person_and_the_message_shows_it(waiting, slack):
    mapped("alice", "operators", "U0ALICE")

    response = click(waiting.pk, "U0ALICE")

    assert response.status_code == 200
    waiting.refresh_from_db()
    assert (waiting.status, waiting.decided_by_name, waiting.automatic) == ("approved", "alice", False)
    [updated] = slack.of("chat.update")
    assert (updated["channel"], updated["ts"]) == (CHANNEL, "1733300000.000100")
    assert updated["text"].startswith("Approved by alice in Slack at ")
    assert not [b for b in updated["blocks"] if b["type"] == "actions"], "the buttons are gone"


def test_a_call_decided_in_the_dashboard_updates_its_message(waiting, slack, no_dispatch):
    bob = make_user("bob", "operators")
    approval_decide(approval_id=waiting.pk, user=bob, approve=False, reason="wrong order")
    runs_sweep()
    runs_sweep()

    [updated] = slack.of("chat.update")
    assert updated["text"].startswith("Rejected by bob in the dashboard at ") and updated["text"].endswith(": wrong order")
    assert ChatMessage.objects.get(approval=waiting).outcome_shown == updated["text"]
    assert click(waiting.pk, "U0NOBODY").status_code == 200  # too late, and unmapped: refused, recorded


def test_bad_clicks_are_refused_recorded_and_decide_nothing(waiting, slack):
    mapped("alice", "operators", "U0ALICE")
    mapped("victor", "viewers", "U0VICTOR")

    assert click(waiting.pk, "U0ALICE", secret="not-the-secret", address="192.0.2.1").status_code == 401
    assert click(waiting.pk, "U0ALICE", age=301, address="192.0.2.2").status_code == 401
    garbled = click(waiting.pk, "U0ALICE", body=b"payload=%7Bnot+json")
    assert garbled.status_code == 200
    assert click(waiting.pk, "U0STRANGER").status_code == 200
    assert click(waiting.pk, "U0VICTOR").status_code == 200
    response = Client().post("/chat/slack/interactions", b"payload=x", content_type="application/x-www-form-urlencoded",
                             REMOTE_ADDR="192.0.2.3")
    assert response.status_code == 401
    for _ in range(20):  # junk from one address: refused every time, recorded once a minute
        assert click(waiting.pk, "U0ALICE", secret="junk", address="192.0.2.3").status_code == 401

    waiting.refresh_from_db()
    assert waiting.status == Approval.Status.PENDING
    refused = list(AuditEntry.objects.filter(action="chat_refused").order_by("pk").values_list("detail", flat=True))
    assert refused[0] == "bad signature: X-Slack-Signature does not match the body"
    # Signed 301 s before it was sent; read a second later under load, it is 302 s old by then.
    age = re.match(r"old timestamp: signed (\d+) s ago", refused[1])
    assert age and 301 <= int(age.group(1)) <= 310
    assert refused[2] == "not a block action of an approval message"
    assert refused[3] == "Slack member U0STRANGER is not mapped to an active account here"
    assert refused[4] == "victor may not decide destructive calls"
    assert refused[5].startswith("bad timestamp") and len(refused) == 6
    assert AuditEntry.objects.filter(action="chat_refused", address="192.0.2.3").count() == 1
    told = [body["text"] for body in slack.of("chat.postEphemeral")]
    assert told == ["Not decided: Slack member U0STRANGER is not mapped to an active account here.",
                    "Not decided: victor may not decide destructive calls."]


def test_a_click_signed_in_the_future_is_refused_and_decides_nothing(waiting, slack):
    # Signed ten minutes ahead: within the window once that time comes, so a replay waiting for it.
    mapped("alice", "operators", "U0ALICE")

    assert click(waiting.pk, "U0ALICE", age=-600).status_code == 401

    waiting.refresh_from_db()
    assert waiting.status == Approval.Status.PENDING
    [refused] = AuditEntry.objects.filter(action="chat_refused").values_list("detail", flat=True)
    ahead = re.match(r"future timestamp: signed (\d+) s ahead of this server's clock", refused)
    assert ahead and 590 <= int(ahead.group(1)) <= 600
    assert not slack.of("chat.postEphemeral")


def test_a_click_of_a_member_whose_account_was_deactivated_decides_nothing(waiting, slack):
    # The mapping stays when an administrator deactivates the account: the click must not decide.
    alice = mapped("alice", "operators", "U0ALICE")
    alice.is_active = False
    alice.save(update_fields=["is_active"])

    assert click(waiting.pk, "U0ALICE").status_code == 200

    waiting.refresh_from_db()
    assert waiting.status == Approval.Status.PENDING
    assert AuditEntry.objects.filter(action="chat_refused").get().detail == (
        "Slack member U0ALICE is not mapped to an active account here")
    assert [body["text"] for body in slack.of("chat.postEphemeral")] == [
        "Not decided: Slack member U0ALICE is not mapped to an active account here."]


def test_the_queue_rules_hold_in_chat_a_named_group_and_the_launcher(launch, slack, no_dispatch):
    finance = Group.objects.create(name="finance")
    alice = mapped("alice", "operators", "U0ALICE")
    approval = pending_approval(launch(TASK))
    Approval.objects.filter(pk=approval.pk).update(group=finance)

    assert click(approval.pk, "U0ALICE").status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    assert AuditEntry.objects.filter(action="chat_refused").get().detail == (
        "alice: Only members of finance may decide this call.")
    alice.groups.add(finance)
    click(approval.pk, "U0ALICE", action="reject")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_name, approval.reason) == ("rejected", "alice", "rejected in Slack by alice")


def test_an_incoming_webhook_gets_the_message(launch, settings, slack):
    settings.SLACK_BOT_TOKEN = settings.SLACK_CHANNEL = ""
    settings.SLACK_WEBHOOK_URL = f"http://127.0.0.1:{slack.port}/hook"
    approval = pending_approval(launch(TASK))

    [posted] = slack.of("hook")
    assert "cancel_order" in posted["text"] and posted["blocks"][-1]["type"] == "actions"
    message = ChatMessage.objects.get(approval=approval)
    assert (message.status, message.ts) == ("posted", "")


def test_without_a_channel_nothing_is_posted(launch, demo_data):
    pending_approval(launch(TASK))
    assert not ChatMessage.objects.exists()


def test_a_message_is_posted_once_however_often_it_is_sent(waiting, slack):
    from runs.supervision.chat.messages import chat_post

    message = ChatMessage.objects.get(approval=waiting)
    chat_post(message_id=message.pk)
    chat_post(message_id=message.pk)
    ChatMessage.objects.filter(pk=message.pk).update(status="posting")  # a claim still fresh: someone is posting
    chat_post(message_id=message.pk)
    assert len(slack.of("chat.postMessage")) == 1


def test_an_outcome_that_cannot_be_shown_is_given_up_after_a_few_sweeps(waiting, slack, settings, no_dispatch):
    bob = make_user("bob", "operators")
    approval_decide(approval_id=waiting.pk, user=bob, approve=True)
    settings.SLACK_BOT_TOKEN = "xoxb-revoked"  # every chat.update now fails (invalid_auth)
    for _ in range(8):
        runs_sweep()
    message = ChatMessage.objects.get(approval=waiting)
    assert message.outcome_shown == "(not shown: chat.update: invalid_auth)"
    assert len(slack.of("chat.update")) == 5
