"""The approval queue holds a page at a time: 50 approvals a page, and only the shown approvals'
runs are read (their steps up to the asking one), however many approvals wait."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Approval, Run, Step, ToolCall
from tests.support.approval_fixtures import pending_approval

DEMO_TASK = "Cancel order ORD-1001"


def clone_run(run: Run, copies: int) -> list[Run]:
    """`copies` more runs waiting like `run`: same steps, calls and pending approval."""
    made = []
    steps = list(Step.objects.filter(run=run).order_by("index"))
    calls = list(ToolCall.objects.filter(run=run).order_by("step__index", "index"))
    approval = pending_approval(run)
    for _ in range(copies):
        clone = Run.objects.get(pk=run.pk)
        clone.pk = None
        clone.save()
        new_steps = {}
        for step in steps:
            old_pk, step.pk, step.run = step.pk, None, clone
            step.save()
            new_steps[old_pk] = step.pk
            step.pk = old_pk
        for call in calls:
            old = (call.pk, call.step_id, call.approval_id)
            call.pk, call.run, call.step_id, call.approval_id = None, clone, new_steps[call.step_id], None
            call.save()
            if old[0] == approval.tool_call_id:
                Approval.objects.create(run=clone, tool_call=call)
            call.pk, call.step_id, call.approval_id = old
            call.run = run
        made.append(clone)
    return made


@pytest.fixture
def waiting(launch, no_dispatch):
    """120 runs, each waiting on one approval, oldest first."""
    first = launch(DEMO_TASK, approval_policy="ask")
    runs = [first, *clone_run(first, 119)]
    assert Approval.objects.filter(status=Approval.Status.PENDING).count() == 120
    return runs


def test_the_queue_shows_fifty_waiting_approvals_a_page_with_links_to_the_others(waiting, client, alice):
    client.force_login(alice)
    html = client.get(reverse("approval_queue")).content.decode()
    assert html.count('class="card approval"') == 50
    assert "Waiting (120)" in html
    assert re.search(r'href="/approvals/\?page=2" rel="next"', html)
    first_page = [int(pk) for pk in re.findall(r'class="card approval" data-approval-id="(\d+)"', html)]
    oldest = list(Approval.objects.filter(status=Approval.Status.PENDING).order_by("requested_at", "pk")
                  .values_list("pk", flat=True))
    assert first_page == oldest[:50]

    last = client.get(reverse("approval_queue"), {"page": 3}).content.decode()
    assert last.count('class="card approval"') == 20 and 'rel="prev"' in last and 'rel="next"' not in last
    # The page's live updates reload the same page.
    assert 'data-partial-url="/approvals/pending/?page=3"' in last
    partial = client.get(reverse("approval_queue_partial"), {"page": 3}).content.decode()
    assert partial.count('class="card approval"') == 20
    # The header badge still counts every waiting approval.
    assert client.get(reverse("approval_count")).json()["pending"] == 120


def test_the_queue_reads_only_the_shown_runs_in_a_fixed_number_of_queries(waiting, client, alice):
    client.force_login(alice)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("approval_queue")).status_code == 200
    # 12, the cards' evidence (its rows, the sensitive fields of the tools it quotes), the twins (the
    # cards' keys, then the calls sharing them) and the first-shown stamp.
    assert len(queries) <= 17
    step_reads = [q["sql"] for q in queries if re.search(r'FROM "runs_step"', q["sql"])]
    assert step_reads, "the steps are read to show what the model saw"
    shown = {run.pk for run in waiting[:50]}
    not_shown = {run.pk for run in waiting[50:]}
    read = set()
    for sql in step_reads:
        read |= {int(pk) for pk in re.findall(r'"runs_step"\."run_id" = (\d+)', sql)}
        for listed in re.findall(r'"runs_step"\."run_id" IN \(([^)]*)\)', sql):
            read |= {int(pk) for pk in re.findall(r"\d+", listed)}
    assert read == shown and not read & not_shown


def test_the_api_lists_pending_approvals_fifty_a_page(waiting, alice):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(alice)
    first = client.get("/api/v1/approvals/").json()
    assert first["count"] == 120 and len(first["results"]) == 50 and first["previous"] is None
    assert first["next"].endswith("/api/v1/approvals/?page=2")
    third = client.get("/api/v1/approvals/", {"page": 3}).json()
    assert len(third["results"]) == 20 and third["next"] is None
    assert client.get("/api/v1/approvals/", {"page": "x"}).status_code == 400


def test_arguments_nested_too_deeply_to_show_do_not_break_the_queue(launch, client, alice, no_dispatch):
    # Stored by a version that accepted them: the queue shows the others and says why not this one.
    run = launch(DEMO_TASK, approval_policy="ask")
    deep = '{"order_id": ' + "[" * 990 + "]" * 990 + "}"
    ToolCall.objects.filter(pk=pending_approval(run).tool_call_id).update(arguments=deep)
    client.force_login(alice)
    response = client.get(reverse("approval_queue"))
    assert response.status_code == 200
    assert "The arguments are nested too deeply to show" in response.content.decode()
