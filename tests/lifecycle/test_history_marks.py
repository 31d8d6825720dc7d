"""What a run's status alone does not tell, in the history, on the run page and in the API: the calls
people rejected or edited (marked and filterable, counted without a query per row), and a stop an
operator asked for, in words."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from runs.lifecycle.run_marks import decision_marks
from runs.models import Agent, Approval, Run, ToolCall
from tests.lifecycle.test_history import get, listed, make_run, user_in

pytestmark = pytest.mark.django_db


def decided(run: Run, status: str, *, edited: bool = False) -> Approval:
    """A cancel_order call of `run` decided as `status` (approved with edited arguments when `edited`)."""
    n = ToolCall.objects.filter(run=run).count()
    step = run.steps.first() or run.steps.create(index=1, iteration=1, model="m", message={"role": "assistant"})
    call = ToolCall.objects.create(run=run, step=step, index=n, call_id=f"c{n}", tool_name="cancel_order",
                                   arguments='{"order_id": "ORD-1"}', args_hash=f"h{n}", idempotency_key=f"k{run.pk}-{n}",
                                   status=ToolCall.Status.SKIPPED if status == Approval.Status.REJECTED else ToolCall.Status.SUCCEEDED)
    return Approval.objects.create(run=run, tool_call=call, status=status, decided_by_name="olga",
                                   edited_arguments='{"order_id": "ORD-2"}' if edited else "",
                                   edited_args_hash="e" * 64 if edited else "")


@pytest.fixture
def runs():
    agent = Agent.objects.create(name="alpha")
    plain = make_run(agent, "did as asked")
    refused = make_run(agent, "cancel an order")
    decided(refused, Approval.Status.REJECTED)
    decided(refused, Approval.Status.APPROVED)  # approved as asked: no mark
    edited = make_run(agent, "cancel two orders")
    decided(edited, Approval.Status.APPROVED, edited=True)
    decided(edited, Approval.Status.APPROVED, edited=True)
    stopped = make_run(agent, "stopped", status=Run.Status.CANCELLED, stop_reason=Run.StopReason.OPERATOR_STOP)
    cancelled = make_run(agent, "cancelled", status=Run.Status.CANCELLED, stop_reason=Run.StopReason.CANCELLED)
    return {"plain": plain, "refused": refused, "edited": edited, "stopped": stopped, "cancelled": cancelled}


@pytest.fixture
def viewer():
    return user_in("viewers", "vera")


def row_of(html: str, run: Run) -> str:
    row = html[html.index(f'data-run-id="{run.pk}"'):]
    return row[: row.index("</tr>")]


def test_marks_say_how_many_calls_were_rejected_or_edited():
    assert decision_marks(rejected=0, edited=0) == []
    assert decision_marks(rejected=1, edited=0) == ["1 call rejected"]
    assert decision_marks(rejected=2, edited=1) == ["2 calls rejected", "1 call edited"]


def test_the_history_marks_a_run_beside_its_status_which_stays(client, viewer, runs):
    client.force_login(viewer)
    html = get(client).content.decode()
    refused = row_of(html, runs["refused"])
    assert ">Succeeded<" in refused and '<span class="run-mark">1 call rejected</span>' in refused
    assert '<span class="run-mark">2 calls edited</span>' in row_of(html, runs["edited"])
    assert "run-mark" not in row_of(html, runs["plain"])
    # Stopped with a summary reads as such; a cancel stays a cancel.
    assert ">Stopped by an operator<" in row_of(html, runs["stopped"])
    assert ">Cancelled<" in row_of(html, runs["cancelled"])


@pytest.mark.parametrize("kind, names", [
    ("rejected", {"refused"}), ("edited", {"edited"}), ("rejected_or_edited", {"refused", "edited"}),
])
def test_the_history_filter_finds_runs_whose_calls_people_rejected_or_edited(client, viewer, runs, kind, names):
    client.force_login(viewer)
    assert set(listed(get(client, decisions=kind))) == {runs[name].pk for name in names}


def test_a_bad_decisions_value_is_an_error_at_its_field(client, viewer, runs):
    client.force_login(viewer)
    html = get(client, decisions="nope").content.decode()
    assert 'id="history-invalid"' in html and "Select a valid choice" in html


def test_the_marks_cost_no_query_per_row(client, viewer):
    client.force_login(viewer)
    agent = Agent.objects.create(name="alpha")
    decided(make_run(agent), Approval.Status.REJECTED)
    with CaptureQueriesContext(connection) as one:
        assert len(listed(get(client))) == 1
    for n in range(55):
        run = make_run(agent)
        decided(run, Approval.Status.REJECTED if n % 2 else Approval.Status.APPROVED, edited=not n % 2)
    with CaptureQueriesContext(connection) as page:
        html = get(client).content.decode()
    assert html.count('class="run-row"') == 50 and html.count("1 call rejected") + html.count("1 call edited") == 50
    assert len(page.captured_queries) <= len(one.captured_queries)


def test_the_run_page_shows_the_marks_and_an_operators_stop_by_its_status(client, viewer, runs):
    client.force_login(viewer)
    html = client.get(reverse("run_detail", args=[runs["refused"].pk])).content.decode()
    assert re.search(r'id="run-status"[^>]*>Succeeded</span>\s*<span class="run-mark">1 call rejected</span>', html)
    html = client.get(reverse("run_detail", args=[runs["stopped"].pk])).content.decode()
    assert re.search(r'id="run-status"[^>]*data-status="cancelled">Stopped by an operator<', html)


def test_the_api_lists_the_marks_and_the_label_and_filters_by_them(viewer, runs):
    api = APIClient()
    api.force_authenticate(viewer)
    results = {r["run_id"]: r for r in api.get("/api/v1/runs/").json()["results"]}
    assert (results[runs["refused"].pk]["calls_rejected"], results[runs["refused"].pk]["calls_edited"]) == (1, 0)
    assert (results[runs["edited"].pk]["calls_rejected"], results[runs["edited"].pk]["calls_edited"]) == (0, 2)
    assert results[runs["refused"].pk]["status"] == "succeeded"
    assert results[runs["stopped"].pk]["status"] == "cancelled"
    assert results[runs["stopped"].pk]["status_label"] == "Stopped by an operator"
    assert results[runs["cancelled"].pk]["status_label"] == "Cancelled"
    found = api.get("/api/v1/runs/", {"decisions": "rejected"}).json()["results"]
    assert [r["run_id"] for r in found] == [runs["refused"].pk]
    bad = api.get("/api/v1/runs/", {"decisions": "nope"})
    assert bad.status_code == 400 and "decisions" in bad.json()["errors"]

    detail = api.get(f"/api/v1/runs/{runs['edited'].pk}/").json()
    assert (detail["calls_rejected"], detail["calls_edited"], detail["status_label"]) == (0, 2, "Succeeded")
    assert api.get(f"/api/v1/runs/{runs['stopped'].pk}/").json()["status_label"] == "Stopped by an operator"
