"""The evidence on the queue's card: what an operator reads before deciding a call.

The demo shop's mistake this guards against: the model looked up ORD-1001, read that it was
already cancelled, and asked to cancel it anyway; the card showed the task and the arguments but
not what the model had just read."""
import html
import re

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Approval, CallEvidence
from tests.engine.loop_contract.support import call
from tests.support.approval_fixtures import pending_approval
from toolsapp.models import Order, Tool


def card_of(client, approval: Approval) -> str:
    page = client.get(reverse("approval_queue"))
    assert page.status_code == 200
    text = page.content.decode()
    start = text.index(f'data-approval-id="{approval.pk}"')
    return text[start:text.index("</article>", start)]


def section(card: str, heading: str) -> str:
    """The card's text from a heading to the next heading (or the card's end)."""
    start = card.index(heading)
    following = card.find("<h3", start)
    return card[start:following if following != -1 else len(card)]


def cancel_after_lookup(script, launch, *, said="The order is cancelled already, but I will cancel it."):
    model = script({"tool_calls": [call("lookup_order", {"order_id": "ORD-1001"}, "look")]},
                   {"content": said, "tool_calls": [call("cancel_order", {"order_id": "ORD-1001",
                                                                           "reason": "customer asked"}, "cancel")]})
    return pending_approval(launch("Please cancel my desk order", models=[model], approval_policy="ask"))


def test_the_card_shows_the_lookup_the_model_had_just_read_and_where_each_value_came_from(
        launch, script, client, alice):
    Order.objects.filter(order_id="ORD-1001").update(status=Order.Status.CANCELLED)
    approval = cancel_after_lookup(script, launch)
    client.force_login(alice)
    card = card_of(client, approval)

    read = section(card, "What the model had just read")
    assert re.search(r'<span class="read-source mono">lookup_order</span> <span class="muted read-step">step 1</span>', read)
    assert re.search(r'<a href="/runs/\d+/#step-1">Step 1 on the run page</a>', read), "a link to the step, outside the summary"
    assert '&quot;status&quot;: &quot;<mark class="read-state">cancelled</mark>&quot;' in read, (
        "the lookup's answer, whole, on the card, the state it reports marked")
    summary = re.search(r"<summary>.*?</summary>", read, re.S).group(0)
    assert '<mark class="read-state">status: cancelled</mark>' in summary, "the state at a glance, without opening it"

    where = section(card, "Where each value came from")
    order_line = re.search(r'data-path="\$\.order_id".*?</li>', where, re.S).group(0)
    assert html.unescape(re.sub(r"\s+", " ", order_line)).count("from lookup_order's result at step 1") == 1
    assert "<mark>ORD-1001</mark>" in order_line
    reason_line = re.search(r'data-path="\$\.reason".*?</li>', where, re.S).group(0)
    assert "the model wrote this" in reason_line and "<mark>" not in reason_line
    assert "outside content" not in card, "nothing here came from outside content"
    # The model's words are labelled as its own, apart from the product's.
    assert "In the model's own words, just before this call:" in card
    assert "The order is cancelled already, but I will cancel it." in card


def test_outside_content_is_marked_in_words_and_sensitive_values_stay_masked(launch, script, client, alice):
    approval = cancel_after_lookup(script, launch)
    evidence = CallEvidence.objects.get(approval=approval)
    data = evidence.data
    data["read"][0]["outside"] = True
    data["values"][0]["outside"] = True
    CallEvidence.objects.filter(pk=evidence.pk).update(data=data, outside_paths=["$.order_id"])
    # Marked sensitive after the call was asked about: masked on its card all the same.
    Tool.objects.filter(name="lookup_order").update(sensitive_fields=["item"])
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["order_id"])
    client.force_login(alice)
    card = card_of(client, approval)

    assert '<span class="badge-outside">from outside content</span>' in section(card, "Where each value came from")
    assert '<span class="badge-outside">outside content</span>' in section(card, "What the model had just read")
    assert "Standing desk" not in card, "the lookup's item is masked in what the model read"
    order_line = re.search(r'data-path="\$\.order_id".*?</li>', card, re.S).group(0)
    assert "ORD-1001" not in order_line and "••••" in order_line and "<mark>" not in order_line


def test_the_queue_reads_every_cards_evidence_at_once(launch, script, client, alice):
    approvals = [cancel_after_lookup(script, launch) for _ in range(2)]
    client.force_login(alice)

    def queries() -> int:
        # The fewest of three loads: a cache that happens to expire during one (the budgets are
        # read again every few seconds; a loaded machine takes seconds a page) is not a query per card.
        counts = []
        for _ in range(3):
            with CaptureQueriesContext(connection) as seen:
                page = client.get(reverse("approval_queue")).content.decode()
            counts.append(len(seen.captured_queries))
        assert page.count("What the model had just read") == len(approvals)
        return min(counts)

    few = queries()
    approvals += [cancel_after_lookup(script, launch) for _ in range(3)]
    assert queries() <= few


def test_reported_states_are_marked_and_escaped_and_prose_is_not_taken_for_a_state():
    from runs.templatetags.approval_display import reported_states, states_marked

    text = '{"status": "cancelled", "note": "<b>x</b>", "state": "on hold", "body": "status: open"}'
    assert reported_states(text) == ["status: cancelled", "state: on hold"]
    marked = str(states_marked(text))
    assert '&quot;status&quot;: &quot;<mark class="read-state">cancelled</mark>&quot;' in marked
    assert "&lt;b&gt;x&lt;/b&gt;" in marked and "<b>" not in marked
    assert reported_states('{"status": "' + "x" * 61 + '"}') == [], "a long value is prose, not a state"
