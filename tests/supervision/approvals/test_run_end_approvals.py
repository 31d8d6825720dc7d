"""A call that waits when an operator cancels or stops its run is closed because the run ended,
with who ended it: never an expiry in the audit, the timeline or any count of who decides. A real
timeout is still an expiry."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from runs.controls.levers import run_stop
from runs.lifecycle.runs import run_cancel
from runs.models import Approval, RunEvent
from runs.observability.metrics.page import metrics_summary
from runs.observability.prometheus.counters import decision_figures
from runs.supervision.approvals.decide import approvals_expire

pytestmark = pytest.mark.django_db
CANCEL = "Please cancel order ORD-1001, the customer asked."
S = Approval.Status


@pytest.fixture
def alice(demo_data):
    user = User.objects.create_user("alice", password="pw-alice-long-enough")
    user.is_superuser = user.is_staff = True
    user.save()
    return user


def waiting(launch) -> Approval:
    return Approval.objects.get(run=launch(CANCEL), status=S.PENDING)


def deciders_on_the_page(rollups: bool) -> dict:
    today = timezone.localdate()
    return {d.kind: d.count for d in metrics_summary(start=today, end=today, rollups=rollups).supervision.deciders}


@pytest.mark.parametrize("end", ["cancel", "stop"])
def test_a_call_waiting_when_an_operator_ends_the_run_is_closed_by_the_run_end_not_expired(launch, alice, end, client):
    approval = waiting(launch)
    if end == "cancel":
        run_cancel(run=approval.run, user=alice)
        said = "Cancelled by alice."
    else:
        run_stop(run_id=approval.run_id, user=alice)
        said = "Stopped by alice"
    approval.refresh_from_db()
    assert approval.status == S.CLOSED and approval.get_status_display() == "Closed: the run ended"
    assert said in approval.reason and "expired" not in approval.reason
    assert approval.decider == "the run's end"
    [event] = RunEvent.objects.filter(run_id=approval.run_id, kind="approval", data__id=approval.pk)
    assert (event.data["status"], event.data["decided_by"]) == ("closed", "the run's end")
    # The audit trail (the approvals page's decisions) says so too.
    client.force_login(alice)
    page = client.get(reverse("approval_queue")).content.decode()
    assert "the run&#x27;s end" in page and "Closed: the run ended" in page

    for rollups in (False, True):
        counts = deciders_on_the_page(rollups)
        assert (counts["run_ended"], counts["expiry"]) == (1, 0), rollups
    counted, _waits = decision_figures()
    assert counted == {("closed", "run_ended"): 1}


def test_a_call_nobody_decided_in_time_is_still_an_expiry(launch, alice):
    approval = waiting(launch)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert approvals_expire() == 1
    approval.refresh_from_db()
    assert (approval.status, approval.decider) == (S.EXPIRED, "expiry")
    counts = deciders_on_the_page(False)
    assert (counts["run_ended"], counts["expiry"]) == (0, 1)
