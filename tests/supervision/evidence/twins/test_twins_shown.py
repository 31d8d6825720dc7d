"""Each card names its twins: calls of its project on the same thing, waiting in another run or
decided in the window, with their state, in the queue and in the API alike."""
import json
import re
from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.engine.loop import run_advance
from runs.models import Agent, Approval, CallEvidence, ToolCall
from runs.supervision.approvals.decide import approval_decide
from runs.supervision.queue.card_controls import approval_for_page
from tests.engine.loop_contract.support import call, calls
from tests.projects import member, project
from tests.supervision.evidence.twins import card, queue_html, text_of, waiting, with_evidence
from toolsapp.models import Tool


def api_pending(user) -> dict[int, dict]:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    response = client.get("/api/v1/approvals/")
    assert response.status_code == 200
    return {item["id"]: item for item in response.json()["results"]}


def twin_words(html: str) -> list[str]:
    return [text_of(li) for li in re.findall(r'<li class="twin .*?</li>', html, re.S)]


def test_two_runs_cancelling_the_same_order_show_each_other_on_their_cards_and_in_the_api(launch, client, alice):
    first, second = waiting(launch), waiting(launch)

    client.force_login(alice)
    html = queue_html(client)
    assert twin_words(card(html, first.pk)) == [f"#{second.pk} cancel_order: also waiting in run {second.run_id}"]
    assert twin_words(card(html, second.pk)) == [f"#{first.pk} cancel_order: also waiting in run {first.run_id}"]
    # A link to the other run, and the words, not a colour, say what it is.
    assert f'href="/runs/{second.run_id}/"' in card(html, first.pk)
    assert "1 other call on the same thing" in text_of(card(html, first.pk))

    listed = api_pending(alice)
    assert listed[first.pk]["twins"] == [
        {"approval": second.pk, "run": second.run_id, "state": "waiting", "words": f"also waiting in run {second.run_id}"}
    ]
    assert [t["approval"] for t in listed[second.pk]["twins"]] == [first.pk]


def test_a_twin_that_ran_in_the_window_is_shown_with_its_state(launch, client, alice, no_dispatch):
    earlier = waiting(launch)
    approval_decide(approval_id=earlier.pk, user=alice, approve=True)
    run_advance(run_id=earlier.run_id)  # what the worker does next: cancel_order runs
    assert ToolCall.objects.get(pk=earlier.tool_call_id).status == ToolCall.Status.SUCCEEDED
    later = waiting(launch)

    client.force_login(alice)
    (words,) = twin_words(card(queue_html(client), later.pk))
    assert re.fullmatch(rf"#{earlier.pk} cancel_order: ran \d+ s ago in run {earlier.run_id}: succeeded", words)
    (twin,) = api_pending(alice)[later.pk]["twins"]
    assert twin["state"] == "succeeded" and twin["approval"] == earlier.pk

    # Past the window it is no twin any more.
    past = timezone.now() - timedelta(hours=25)
    CallEvidence.objects.filter(pk=earlier.pk).update(created_at=past)
    Approval.objects.filter(pk=earlier.pk).update(decided_at=past)
    assert api_pending(alice)[later.pk]["twins"] == []


def test_a_rejected_twin_is_shown_as_rejected(launch, client, alice, no_dispatch):
    earlier = waiting(launch)
    approval_decide(approval_id=earlier.pk, user=alice, approve=False, reason="the customer called back")
    later = waiting(launch)
    client.force_login(alice)
    (words,) = twin_words(card(queue_html(client), later.pk))
    assert re.fullmatch(rf"#{earlier.pk} cancel_order: rejected \d+ s ago in run {earlier.run_id}", words)


def test_another_projects_twin_is_never_shown(launch, client, alice, no_dispatch):
    """The same order cancelled by another team's agent: each team sees its own calls only, and
    a person who sees both projects sees no twin across them either."""
    alpha, beta = project("Alpha"), project("Beta")
    demo = Agent.objects.get(name="demo")
    Agent.objects.filter(pk=demo.pk).update(project=alpha)
    copy = Agent.objects.get(pk=demo.pk)
    copy.pk, copy.name, copy.project = None, "billing-bot", beta
    copy.save()
    copy.tools.set(demo.tools.all())
    ours, theirs = waiting(launch), waiting(launch, agent="billing-bot")
    assert CallEvidence.objects.get(pk=ours.pk).identity == CallEvidence.objects.get(pk=theirs.pk).identity

    ann = member("ann", alpha)
    client.force_login(ann)
    html = queue_html(client)
    assert f"run {theirs.run_id}" not in html and "Twin" not in text_of(card(html, ours.pk))
    assert api_pending(ann)[ours.pk]["twins"] == []

    client.force_login(alice)  # a site operator: both projects' cards, no twins across them
    html = queue_html(client)
    assert twin_words(card(html, ours.pk)) == [] and twin_words(card(html, theirs.pk)) == []


def test_different_orders_are_not_twins(launch, client, alice):
    one, other = waiting(launch), waiting(launch, "Cancel order ORD-1002")
    client.force_login(alice)
    html = queue_html(client)
    assert twin_words(card(html, one.pk)) == [] and twin_words(card(html, other.pk)) == []
    assert all(item["twins"] == [] for item in api_pending(alice).values())


def scripted_cancel(launch, script, reason: str) -> Approval:
    model = script(calls(call("cancel_order", {"order_id": "ORD-1001", "reason": reason}, "c1")))
    return waiting(launch, models=[model])


def test_calls_on_the_same_order_are_twins_whatever_their_other_arguments(launch, script, alice):
    Tool.objects.filter(name="cancel_order").update(identifier_fields=["order_id"])  # as the demo shop has it
    first, second = scripted_cancel(launch, script, "customer asked"), scripted_cancel(launch, script, "duplicate")
    assert [t["approval"] for t in api_pending(alice)[first.pk]["twins"]] == [second.pk]


def test_a_tool_naming_no_identifier_fields_compares_all_its_arguments(launch, script, alice):
    Tool.objects.filter(name="cancel_order").update(identifier_fields=[])
    first = scripted_cancel(launch, script, "customer asked")
    other_reason = scripted_cancel(launch, script, "duplicate order")
    same = scripted_cancel(launch, script, "customer asked")
    listed = api_pending(alice)
    assert [t["approval"] for t in listed[first.pk]["twins"]] == [same.pk]
    assert listed[other_reason.pk]["twins"] == []


def test_a_call_asked_again_after_a_crash_is_not_its_own_twin(launch, alice, no_dispatch):
    first = waiting(launch)
    approval_decide(approval_id=first.pk, user=alice, approve=True)
    # The worker died while cancel_order ran: the loop asked a person again, with a new approval of the same call.
    ToolCall.objects.filter(pk=first.tool_call_id).update(status=ToolCall.Status.AWAITING_APPROVAL)
    again = with_evidence(Approval.objects.create(tool_call_id=first.tool_call_id, run_id=first.run_id, note="crash"))
    ToolCall.objects.filter(pk=first.tool_call_id).update(approval=again)
    elsewhere = waiting(launch)

    assert [t["approval"] for t in approval_for_page(approval_id=again.pk).twins] == [elsewhere.pk]
    # And the other run sees that call once, by its newest approval.
    assert [t["approval"] for t in approval_for_page(approval_id=elsewhere.pk).twins] == [again.pk]


def test_a_decision_keeps_the_twins_its_decider_was_shown(launch, alice, no_dispatch):
    first, second = waiting(launch), waiting(launch)
    approval_decide(approval_id=first.pk, user=alice, approve=True)
    shown = CallEvidence.objects.get(pk=first.pk).twins_at_decision
    assert shown == [{"approval": second.pk, "run": second.run_id, "state": "waiting",
                      "words": f"also waiting in run {second.run_id}"}]
    # Its page, decided, says what was shown then.
    item = approval_for_page(approval_id=first.pk)
    assert item.twins == shown
    assert json.dumps(CallEvidence.objects.get(pk=second.pk).twins_at_decision) == "[]"


def test_the_twins_of_a_page_are_read_in_two_queries_however_many_calls_wait(launch, django_assert_num_queries):
    from runs.supervision.evidence.twins import twins_attach
    from runs.supervision.queue.cards import approvals_pending_page

    def twins_of_page() -> dict[int, int]:
        items = list(approvals_pending_page().object_list)
        with django_assert_num_queries(2):
            twins_attach(items)
        return {item.approval.pk: len(item.twins) for item in items}

    first, second = waiting(launch), waiting(launch)
    assert twins_of_page() == {first.pk: 1, second.pk: 1}
    more = [waiting(launch) for _ in range(4)]
    assert twins_of_page() == {a.pk: 5 for a in (first, second, *more)}
