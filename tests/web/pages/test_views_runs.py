"""Launching, the run page, cancel, re-run and a call's full result, through the views."""
import json

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from runs.lifecycle import launch as launch_module
from runs.lifecycle.runs import run_create
from runs.models import Agent, Run, ToolCall


@pytest.fixture
def users(demo_data):
    def make(name, group=None):
        user = User.objects.create_user(name)  # no password: force_login, and no slow hashing
        if group:
            user.groups.add(Group.objects.get(name=group))
        return user

    return {"viewer": make("vera", "viewers"), "operator": make("otto", "operators"), "nobody": make("nina")}


@pytest.fixture
def dispatched(monkeypatch):
    """Run ids handed to workers by the views (no worker runs in these tests)."""
    ids = []
    monkeypatch.setattr(launch_module, "run_dispatch", lambda *, run_id: ids.append(run_id))
    return ids


def client_for(client, user):
    client.force_login(user)
    return client


def queued_run(**overrides) -> Run:
    return run_create(agent=Agent.objects.get(name="demo"), task="Cancel order ORD-1001", overrides=overrides)


def launch_data(**fields) -> dict:
    data = {"agent": str(Agent.objects.get(name="demo").pk), "task": "What's the weather in Lagos and London?"}
    data.update(fields)
    return data


# --- permissions ------------------------------------------------------------------------------


def test_anonymous_is_sent_to_login(client, demo_data):
    run = queued_run()
    urls = [
        ("get", reverse("run_launch")),
        ("post", reverse("run_launch")),
        ("get", reverse("run_detail", args=[run.pk])),
        ("post", reverse("run_cancel", args=[run.pk])),
        ("post", reverse("run_rerun", args=[run.pk])),
        ("get", reverse("call_result", args=[run.pk, 1])),
    ]
    for method, url in urls:
        response = getattr(client, method)(url)
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("login") + "?next="), url
    assert Run.objects.count() == 1
    assert Run.objects.get().status == Run.Status.QUEUED


def test_viewer_can_read_but_not_launch_cancel_or_rerun(client, users, launch, dispatched):
    finished = launch()
    active = queued_run()
    client_for(client, users["viewer"])
    before = Run.objects.count()

    assert client.get(reverse("run_launch")).status_code == 403
    assert client.post(reverse("run_launch"), launch_data()).status_code == 403
    assert client.post(reverse("run_cancel", args=[active.pk])).status_code == 403
    assert client.post(reverse("run_rerun", args=[finished.pk])).status_code == 403

    assert Run.objects.count() == before
    active.refresh_from_db()
    assert active.status == Run.Status.QUEUED and not active.cancel_requested
    assert dispatched == []

    page = client.get(reverse("run_detail", args=[active.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="cancel-button"' not in html and 'id="rerun-button"' not in html


def test_signed_in_user_without_role_cannot_view(client, users):
    run = queued_run()
    client_for(client, users["nobody"])
    assert client.get(reverse("run_detail", args=[run.pk])).status_code == 403
    assert client.get(reverse("call_result", args=[run.pk, 1])).status_code == 403


def test_operator_sees_cancel_on_active_and_rerun_on_finished_runs(client, users, launch):
    finished = launch()
    active = queued_run()
    client_for(client, users["operator"])

    html = client.get(reverse("run_detail", args=[active.pk])).content.decode()
    assert 'id="cancel-button"' in html
    assert 'id="rerun-form" hidden' in html  # shown by the page script when the run finishes

    html = client.get(reverse("run_detail", args=[finished.pk])).content.decode()
    assert 'id="cancel-button"' not in html
    assert 'id="rerun-form">' in html


def test_run_page_embeds_what_the_live_timeline_needs(client, users, launch):
    run = launch()
    client_for(client, users["viewer"])
    response = client.get(reverse("run_detail", args=[run.pk]))
    html = response.content.decode()
    assert f'data-ws-path="/ws/runs/{run.pk}/"' in html
    assert f'data-rendered-seq="{run.event_seq}"' in html
    assert 'id="timeline"' in html and "js/run_live.js" in html
    assert 'id="run-status"' in html and 'data-status="succeeded"' in html
    assert run.stop_detail in html
    assert 'id="run-answer"' in html


def test_unknown_run_is_404(client, users):
    client_for(client, users["viewer"])
    assert client.get(reverse("run_detail", args=[999999])).status_code == 404


# --- launch -----------------------------------------------------------------------------------


def test_operator_launches_a_run_that_is_dispatched(client, users, dispatched):
    client_for(client, users["operator"])
    assert client.get(reverse("run_launch")).status_code == 200

    response = client.post(reverse("run_launch"), launch_data(customer="globex"))

    run = Run.objects.get()
    assert response.status_code == 302 and response.url == reverse("run_detail", args=[run.pk])
    assert dispatched == [run.pk]
    assert run.created_by == users["operator"]
    assert run.task == "What's the weather in Lagos and London?"
    assert run.customer == "globex"
    assert run.status == Run.Status.QUEUED
    assert run.overrides == {}


def test_only_changed_settings_become_overrides(client, users, dispatched):
    agent = Agent.objects.get(name="demo")
    client_for(client, users["operator"])
    response = client.post(
        reverse("run_launch"),
        launch_data(
            models=" demo ,  script:abc ",
            tools=["get_weather"],
            max_iterations=str(agent.max_iterations),  # the agent's own value: not a change
            repeat_limit="2",
            max_wall_seconds="",
            max_cost_usd="0.5",
            first_tool_choice="required",
            later_tool_choice="",
        ),
    )
    assert response.status_code == 302
    run = Run.objects.get()
    assert run.overrides == {
        "models": ["demo", "script:abc"],
        "tools": ["get_weather"],
        "repeat_limit": 2,
        "max_cost_usd": 0.5,
        "first_tool_choice": "required",
    }
    assert run.config["models"] == ["demo", "script:abc"]
    assert run.config["max_iterations"] == agent.max_iterations


@pytest.mark.parametrize(
    "fields, field_with_error",
    [
        ({"task": "   "}, "task"),
        ({"agent": "999999"}, "agent"),
        ({"max_iterations": "0"}, "max_iterations"),
        ({"max_iterations": "2.5"}, "max_iterations"),
        ({"repeat_limit": "-1"}, "repeat_limit"),
        ({"max_tokens": str(2**53)}, "max_tokens"),
        ({"max_wall_seconds": "abc"}, "max_wall_seconds"),
        ({"max_wall_seconds": "0"}, "max_wall_seconds"),
        ({"max_cost_usd": "-0.01"}, "max_cost_usd"),
        ({"max_cost_usd": "inf"}, "max_cost_usd"),
        ({"models": " , ,"}, "models"),
        ({"tools": ["no_such_tool"]}, "tools"),
        ({"first_tool_choice": "sometimes"}, "first_tool_choice"),
    ],
)
def test_bad_values_are_form_errors_and_create_nothing(client, users, dispatched, fields, field_with_error):
    client_for(client, users["operator"])
    response = client.post(reverse("run_launch"), launch_data(**fields))
    assert response.status_code == 200
    assert field_with_error in response.context["form"].errors
    assert 'class="errorlist' in response.content.decode()
    assert Run.objects.count() == 0 and dispatched == []


def test_disabled_tool_cannot_be_chosen(client, users, dispatched):
    from toolsapp.models import Tool

    Tool.objects.filter(name="create_ticket").update(enabled=False)
    client_for(client, users["operator"])
    response = client.post(reverse("run_launch"), launch_data(tools=["create_ticket"]))
    assert response.status_code == 200 and "tools" in response.context["form"].errors
    assert Run.objects.count() == 0


def test_what_run_create_rejects_is_shown_as_a_form_error(client, users, dispatched):
    Agent.objects.filter(name="demo").update(verifier="no-such-verifier")
    client_for(client, users["operator"])
    response = client.post(reverse("run_launch"), launch_data())
    assert response.status_code == 200
    errors = response.context["form"].non_field_errors()
    assert any("no-such-verifier" in e for e in errors)
    assert "no-such-verifier" in response.content.decode()
    assert Run.objects.count() == 0 and dispatched == []


# --- cancel -----------------------------------------------------------------------------------


def test_cancel_of_a_queued_run_ends_it_cancelled(client, users):
    run = queued_run()
    client_for(client, users["operator"])
    response = client.post(reverse("run_cancel", args=[run.pk]))
    assert response.status_code == 302 and response.url == reverse("run_detail", args=[run.pk]) + "#run-answers"
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.stop_reason == Run.StopReason.CANCELLED
    assert "otto" in run.stop_detail
    assert run.events.order_by("-seq").first().data["status"] == Run.Status.CANCELLED


def test_cancel_needs_post(client, users):
    run = queued_run()
    client_for(client, users["operator"])
    assert client.get(reverse("run_cancel", args=[run.pk])).status_code == 405
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_cancel_of_a_finished_run_changes_nothing(client, users, launch):
    run = launch()
    client_for(client, users["operator"])
    client.post(reverse("run_cancel", args=[run.pk]))
    after = Run.objects.get(pk=run.pk)
    assert (after.status, after.stop_reason, after.event_seq) == (run.status, run.stop_reason, run.event_seq)


# --- re-run -----------------------------------------------------------------------------------


def test_rerun_links_to_the_original_and_copies_its_launch(client, users, launch, dispatched):
    original = launch(customer="globex", max_iterations=6, repeat_limit=2)
    client_for(client, users["operator"])

    response = client.post(reverse("run_rerun", args=[original.pk]))

    rerun = Run.objects.exclude(pk=original.pk).get()
    assert response.status_code == 302 and response.url == reverse("run_detail", args=[rerun.pk])
    assert rerun.rerun_of == original
    assert (rerun.agent, rerun.task, rerun.customer) == (original.agent, original.task, "globex")
    assert rerun.overrides == original.overrides == {"max_iterations": 6, "repeat_limit": 2}
    assert rerun.config["approval_policy"] == original.config["approval_policy"]
    assert rerun.created_by == users["operator"]
    assert rerun.status == Run.Status.QUEUED
    assert dispatched == [rerun.pk]

    html = client.get(reverse("run_detail", args=[rerun.pk])).content.decode()
    assert reverse("run_detail", args=[original.pk]) in html  # "re-run of" link
    html = client.get(reverse("run_detail", args=[original.pk])).content.decode()
    assert reverse("run_detail", args=[rerun.pk]) in html  # listed among the re-runs


def test_rerun_of_an_active_run_is_refused(client, users, dispatched):
    run = queued_run()
    client_for(client, users["operator"])
    response = client.post(reverse("run_rerun", args=[run.pk]))
    assert response.status_code == 302 and response.url == reverse("run_detail", args=[run.pk]) + "#run-answers"
    assert Run.objects.count() == 1 and dispatched == []


# --- a call's full result ---------------------------------------------------------------------


def test_call_result_is_the_full_untruncated_result(client, users, launch, settings):
    settings.TOOL_RESULT_MAX_CHARS = 60  # the model gets a shortened result...
    settings.TOOL_RESULT_PREVIEW_CHARS = 20
    run = launch()
    call = ToolCall.objects.filter(run=run, truncated=True).first()
    assert call is not None, list(ToolCall.objects.filter(run=run).values("tool_name", "result_text"))
    client_for(client, users["viewer"])

    response = client.get(reverse("call_result", args=[run.pk, call.pk]))

    assert response.status_code == 200
    body = response.json()
    assert body["result"] == call.result  # ...the page gets everything that was stored
    assert body["truncated"] is True and body["pk"] == call.pk and body["tool"] == call.tool_name
    assert len(json.dumps(body["result"], separators=(",", ":"))) > settings.TOOL_RESULT_MAX_CHARS


def test_call_result_of_another_runs_call_is_404(client, users, launch):
    first, second = launch(), launch()
    other_call = ToolCall.objects.filter(run=second).first()
    client_for(client, users["viewer"])
    assert client.get(reverse("call_result", args=[first.pk, other_call.pk])).status_code == 404
    assert client.get(reverse("call_result", args=[second.pk, other_call.pk])).status_code == 200
    assert client.get(reverse("call_result", args=[first.pk, 999999])).status_code == 404
