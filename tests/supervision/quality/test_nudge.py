"""The nudge: after the project's number of quick approvals in a row, a person's next card asks
for a one-line reason before Approve and says why; the server refuses an approval without one
(page, API); with one it is accepted and the streak starts again. Off by default; recorded once
per card and person; not before the streak."""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from projects.models import Project
from runs.models import Approval, CallEvidence, NudgeShown, ToolCall
from runs.supervision.approvals import decide
from runs.supervision.approvals.decide import NotAllowed, approval_decide
from runs.supervision.quality.nudges import streak_of
from tests.projects import member, project
from tests.supervision.quality.seed import S, agent_in, at, decided, run_of

pytestmark = pytest.mark.django_db
WHY = "You approved the last 3 calls within 5 s of seeing them: give a one-line reason to approve this one."


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch):
    monkeypatch.setattr(decide, "run_dispatch", lambda run_id: None)


@pytest.fixture
def shop():
    shop = project("Shop")
    Project.objects.filter(pk=shop.pk).update(nudge_after_quick_approvals=3, quick_approval_seconds=5)
    return shop


@pytest.fixture
def alice(shop):
    return member("alice", shop)


@pytest.fixture
def run(shop):
    return run_of(agent_in(shop))


def quick(run, who, n: int, *, day: int = 10) -> None:
    """n quick approvals by `who`, a minute apart, each 2 s after its card was shown."""
    for i in range(n):
        decided(run, by=who, asked=at(day, 10, 60 * i), shown=10, took=2)


def waiting(run) -> Approval:
    """A call asked about 2 s ago: approving it now is quick."""
    return decided(run, status=S.PENDING, asked=timezone.now() - timedelta(seconds=2), took=None,
                   call_status=ToolCall.Status.AWAITING_APPROVAL)


def card(client, approval) -> str:
    html = client.get(reverse("approval_queue")).content.decode()
    start = html.index(f'data-approval-id="{approval.pk}"')
    return html[start:html.index("</article>", start)]


def approve(client, approval, reason=""):
    return client.post(reverse("approval_decide", args=[approval.pk]), {"decision": "approve", "reason": reason},
                       HTTP_ACCEPT="application/json")


def test_the_card_asks_for_a_reason_after_the_streak_and_not_before(client, alice, run):
    quick(run, alice, 2)
    first, second = waiting(run), waiting(run)
    client.force_login(alice)
    assert 'class="nudge"' not in card(client, first)
    assert not NudgeShown.objects.exists()
    assert approve(client, first).status_code == 200  # the third quick approval in a row: no reason needed yet
    shown = card(client, second)
    assert 'class="nudge"' in shown and WHY in shown
    assert 'name="reason" class="nudge-reason"' in shown and 'aria-required="true"' in shown
    card(client, second)  # shown again: still one record
    nudge = NudgeShown.objects.get()
    assert (nudge.approval_id, nudge.user_id, nudge.user_name, nudge.project_id, nudge.streak) == (
        second.pk, alice.pk, "alice", run.agent.project_id, 3)


def test_an_approval_without_a_reason_is_refused_then_with_one_accepted(client, alice, run):
    quick(run, alice, 3)
    due, next_one = waiting(run), waiting(run)
    client.force_login(alice)
    refused = approve(client, due)
    assert refused.status_code == 403 and WHY in refused.json()["error"]
    assert Approval.objects.get(pk=due.pk).status == S.PENDING
    assert approve(client, due, reason="Customer asked twice, order not shipped").status_code == 200
    assert Approval.objects.get(pk=due.pk).reason == "Customer asked twice, order not shipped"
    # The reasoned approval ended the streak: the next card lets Approve through without one.
    assert 'class="nudge"' not in card(client, next_one)
    assert approve(client, next_one).status_code == 200


def test_the_api_refuses_the_same_approval_with_the_same_words(client, alice, run):
    quick(run, alice, 3)
    due = waiting(run)
    client.force_login(alice)
    response = client.post(reverse("api-approval-approve", args=[due.pk]), {}, content_type="application/json")
    assert response.status_code == 403 and WHY in response.json()["detail"]
    response = client.post(reverse("api-approval-approve", args=[due.pk]), {"reason": "checked the order"},
                           content_type="application/json")
    assert response.status_code == 200


def test_a_rejection_a_slow_approval_or_a_reason_ends_the_streak(alice, run):
    def streak() -> int:
        return streak_of(user_id=alice.pk, project_id=run.agent.project_id, length=3, quick_seconds=5)

    quick(run, alice, 2, day=10)
    decided(run, by=alice, status=S.REJECTED, asked=at(11), shown=1, took=1)
    quick(run, alice, 2, day=12)
    assert streak() == 2
    decided(run, by=alice, asked=at(13), shown=1, took=6)  # 6 s: not quick
    quick(run, alice, 2, day=14)
    assert streak() == 2
    decided(run, by=alice, asked=at(15), shown=1, took=1, reason="refund confirmed by phone")
    quick(run, alice, 2, day=16)
    assert streak() == 2
    quick(run, alice, 1, day=17)
    assert streak() == 3


def test_off_by_default(alice, run, shop):
    Project.objects.filter(pk=shop.pk).update(nudge_after_quick_approvals=0)
    quick(run, alice, 20)
    approval_decide(approval_id=waiting(run).pk, user=alice, approve=True)


def test_another_persons_or_another_projects_streak_is_not_mine(alice, run, shop):
    bob = member("bob", shop)
    quick(run, bob, 5)
    elsewhere = project("Other")
    member("alice", elsewhere)
    quick(run_of(agent_in(elsewhere)), alice, 5)
    approval_decide(approval_id=waiting(run).pk, user=alice, approve=True)
    with pytest.raises(NotAllowed, match="give a one-line reason"):
        approval_decide(approval_id=waiting(run).pk, user=bob, approve=True)


def test_a_card_is_stamped_shown_once_by_someone_who_may_decide_it(client, alice, run, shop):
    approval = waiting(run)
    viewer = member("vera", shop, "viewers")
    client.force_login(viewer)
    card(client, approval)
    assert CallEvidence.objects.get(pk=approval.pk).shown_at is None  # a viewer cannot decide it
    client.force_login(alice)
    card(client, approval)
    first = CallEvidence.objects.get(pk=approval.pk).shown_at
    assert first is not None
    card(client, approval)
    assert CallEvidence.objects.get(pk=approval.pk).shown_at == first


def test_a_nudged_card_keeps_the_reason_written_in_either_of_its_two_reason_fields(client, alice, run):
    """A nudged card sends two fields named reason (rejecting's, then the nudge's): the one the
    person wrote is the one recorded, whichever it is."""
    quick(run, alice, 3)
    rejected, approved = waiting(run), waiting(run)
    client.force_login(alice)
    url = reverse("approval_decide", args=[rejected.pk])
    client.post(url, {"decision": "reject", "reason": ["Order already cancelled", ""]}, HTTP_ACCEPT="application/json")
    assert Approval.objects.get(pk=rejected.pk).reason == "Order already cancelled"
    quick(run, alice, 3)
    url = reverse("approval_decide", args=[approved.pk])
    answer = client.post(url, {"decision": "approve", "reason": ["", "Checked the order: still open"]},
                         HTTP_ACCEPT="application/json")
    assert answer.status_code == 200
    assert Approval.objects.get(pk=approved.pk).reason == "Checked the order: still open"
