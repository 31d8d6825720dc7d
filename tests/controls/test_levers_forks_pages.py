"""The levers and fork pages through the views: who may pull what, CSRF, safe GETs, "too late"."""
import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from runs.lifecycle import forks
from runs.lifecycle.runs import run_create
from runs.models import Agent, OperatorMessage, Run, RunEvent

LEVERS = ["run_pause", "run_resume", "run_message", "run_stop"]
FOUR_STEPS = [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}, "id": "call_lagos"}]},
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "London"}, "id": "call_london"}]},
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_paris"}]},
    {"content": "Lagos, London and Paris are warm enough."},
]


@pytest.fixture
def users(demo_data):
    def make(name, group=None):
        user = User.objects.create_user(name)  # no password: force_login, and no slow hashing
        if group:
            user.groups.add(Group.objects.get(name=group))
        return user

    return {"viewer": make("vera", "viewers"), "operator": make("otto", "operators")}


@pytest.fixture
def dispatched(monkeypatch):
    """Run ids handed to workers by forks (no worker runs in these tests)."""
    ids = []
    monkeypatch.setattr(forks, "run_dispatch", lambda *, run_id: ids.append(run_id))
    return ids


def queued_run() -> Run:
    return run_create(agent=Agent.objects.get(name="demo"), task="Cancel order ORD-1001")


def signed_in(client, user):
    client.force_login(user)
    return client


def snapshot(run: Run) -> tuple:
    """What a refused or forbidden request must leave as it was."""
    run.refresh_from_db()
    return (run.status, run.pause_requested, run.stop_requested_by_name, run.event_seq,
            OperatorMessage.objects.filter(run=run).count(), Run.objects.count())


def test_anonymous_is_sent_to_sign_in(client, demo_data, launch):
    finished = launch()
    active = queued_run()
    before = snapshot(active)
    requests = [("post", reverse(name, args=[active.pk])) for name in LEVERS] + [
        ("get", reverse("run_fork", args=[finished.pk])),
        ("post", reverse("run_fork", args=[finished.pk])),
        ("get", reverse("run_compare", args=[finished.pk])),
    ]
    for method, url in requests:
        response = getattr(client, method)(url, {"step": 1, "text": "hello"})
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("login") + "?next="), url
    assert snapshot(active) == before


def test_a_viewer_sees_the_run_but_no_levers_and_cannot_pull_them(client, users, launch):
    finished = launch()
    active = queued_run()
    signed_in(client, users["viewer"])
    page = client.get(reverse("run_detail", args=[active.pk])).content.decode()
    for control in ['id="pause-button"', 'id="resume-button"', 'id="stop-button"', 'id="message-form"', "data-fork-url"]:
        assert control not in page
    before = snapshot(active)
    for name in LEVERS:
        assert client.post(reverse(name, args=[active.pk]), {"text": "hello"}).status_code == 403, name
    assert client.get(reverse("run_fork", args=[finished.pk])).status_code == 403
    assert client.post(reverse("run_fork", args=[finished.pk]), {"step": 1}).status_code == 403
    assert snapshot(active) == before


def test_an_operator_sees_the_levers_of_an_active_run_and_none_on_a_finished_one(client, users, launch):
    finished = launch()
    active = queued_run()
    signed_in(client, users["operator"])
    page = client.get(reverse("run_detail", args=[active.pk])).content.decode()
    for control in ['id="pause-button"', 'id="stop-button"', 'id="message-form"', "data-fork-url"]:
        assert control in page
    assert "{#" not in page and "{%" not in page
    done = client.get(reverse("run_detail", args=[finished.pk])).content.decode()
    # The controls' section is there but hidden: a finished run has no lever to pull.
    assert re.search(r'<section id="run-levers"[^>]*\shidden>', done)
    assert not re.search(r'<section id="run-levers"[^>]*\shidden>', page)


def test_levers_need_a_csrf_token(users, demo_data):
    run = queued_run()
    client = signed_in(Client(enforce_csrf_checks=True), users["operator"])
    before = snapshot(run)
    for name in LEVERS:
        assert client.post(reverse(name, args=[run.pk]), {"text": "hello"}).status_code == 403, name
    assert snapshot(run) == before
    # The run page's own form carries the token: the same request with it is taken.
    page = client.get(reverse("run_detail", args=[run.pk]))
    token = page.context["csrf_token"]
    response = client.post(reverse("run_message", args=[run.pk]), {"text": "hello", "csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302
    assert OperatorMessage.objects.filter(run=run, text="hello").count() == 1


def test_a_get_changes_nothing(client, users, launch, dispatched):
    finished = launch()
    active = queued_run()
    signed_in(client, users["operator"])
    before, events = snapshot(active), RunEvent.objects.count()
    for name in LEVERS:
        assert client.get(reverse(name, args=[active.pk]), {"text": "hello"}).status_code == 405, name
    form = client.get(reverse("run_fork", args=[finished.pk]), {"step": 2, "edit": "message", "content": "hi"})
    assert form.status_code == 200
    assert client.get(reverse("run_fork", args=[finished.pk]), {"step": "²"}).status_code == 200  # not a step: the last one
    assert snapshot(active) == before
    assert RunEvent.objects.count() == events and dispatched == []


def test_a_lever_on_a_run_that_ended_says_too_late_and_changes_nothing(client, users, launch):
    run = launch()
    assert run.is_finished
    signed_in(client, users["operator"])
    before = snapshot(run)
    for name in ["run_pause", "run_stop", "run_message"]:
        response = client.post(reverse(name, args=[run.pk]), {"text": "hello"}, follow=True)
        # Back at the controls, with the answer there rather than at the top of the page.
        assert response.redirect_chain[-1][0] == reverse("run_detail", args=[run.pk]) + "#run-answers"
        text = " ".join(str(m) for m in response.context["messages"])
        assert "Too late: the run ended as Succeeded" in text, name
        html = response.content.decode()
        answers = re.search(r'<div id="run-answers"[^>]*>(.*?)</div>', html, re.S).group(1)
        assert "Too late: the run ended as Succeeded" in answers, name
        top = re.search(r'<ul class="messages">(.*?)</ul>', html, re.S)
        assert top is None or "Too late" not in top.group(1), name
    answer = client.post(reverse("run_pause", args=[run.pk]), HTTP_ACCEPT="application/json")
    assert answer.status_code == 409 and answer.json()["error"].startswith("Too late: the run ended as")
    assert snapshot(run) == before


def test_pausing_a_queued_run_shows_who_paused_it_and_offers_resume(client, users, demo_data):
    run = queued_run()
    signed_in(client, users["operator"])
    response = client.post(reverse("run_pause", args=[run.pk]), follow=True)
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED and run.paused_by_name == "otto"
    page = response.content.decode()
    assert 'id="run-paused" class="warn"' in page and ">otto</strong>" in page
    resume_url = reverse("run_resume", args=[run.pk])
    assert f'<form method="post" action="{resume_url}" id="resume-form">' in page
    assert 'id="pause-form" hidden' in page
    listed = client.get(reverse("run_list"), {"status": Run.Status.PAUSED}).content.decode()
    assert f'data-run-id="{run.pk}"' in listed and 'class="status status-paused">Paused<' in listed


def test_an_empty_message_is_refused_in_words(client, users, demo_data):
    run = queued_run()
    signed_in(client, users["operator"])
    answer = client.post(reverse("run_message", args=[run.pk]), {"text": "   "}, HTTP_ACCEPT="application/json")
    assert answer.status_code == 409 and answer.json()["error"]
    assert not OperatorMessage.objects.filter(run=run).exists()


def test_fork_form_then_fork_with_an_edited_result_links_parent_fork_and_comparison(client, users, launch, script, dispatched):
    parent = launch(models=[script(*FOUR_STEPS)])
    assert parent.status == Run.Status.SUCCEEDED and parent.steps.count() == 4
    signed_in(client, users["operator"])
    form = client.get(reverse("run_fork", args=[parent.pk]), {"step": 2}).content.decode()
    assert 'data-step="2"' in form and 'value="call_london"' in form

    response = client.post(reverse("run_fork", args=[parent.pk]), {
        "step": 2, "edit": "tool_result", "call_id": "call_london", "content": "London: snowing, -3 C",
    })
    fork = Run.objects.get(forked_from=parent)
    assert response.status_code == 302 and response.url == reverse("run_detail", args=[fork.pk])
    assert fork.forked_at_step == 2 and dispatched == [fork.pk]

    page = client.get(response.url).content.decode()
    assert reverse("run_compare", args=[fork.pk]) in page and f"Fork of <a href=\"{reverse('run_detail', args=[parent.pk])}\"" in page
    family = client.get(reverse("run_detail", args=[parent.pk])).content.decode()
    assert f'class="family-fork" data-run-id="{fork.pk}"' in family
    compare = client.get(reverse("run_compare", args=[fork.pk]))
    assert compare.status_code == 200 and "Forked from step 2" in compare.content.decode()
    assert client.get(reverse("run_compare", args=[parent.pk])).status_code == 404


def test_a_refused_fork_says_why_and_creates_nothing(client, users, launch, dispatched):
    parent = launch()
    signed_in(client, users["operator"])
    before = Run.objects.count()
    response = client.post(reverse("run_fork", args=[parent.pk]), {
        "step": 1, "edit": "tool_result", "call_id": "no-such-call", "content": "x",
    })
    assert response.status_code == 400
    assert response.context["form"].non_field_errors()
    assert Run.objects.count() == before and dispatched == []


def test_the_fork_form_says_what_differs_from_the_parents_settings_and_refuses_a_fork_past_the_cap(
        client, users, launch, script, dispatched):
    from toolsapp.models import Tool

    parent = launch(models=[script(*FOUR_STEPS)])
    agent = parent.agent
    agent.tools.remove(Tool.objects.get(name="cancel_order"))  # an admin takes a tool away and lowers the cap
    agent.max_iterations = 2
    agent.save()
    signed_in(client, users["operator"])

    form = client.get(reverse("run_fork", args=[parent.pk]), {"step": 1}).content.decode()
    assert 'id="fork-differences"' in form
    assert "cancel_order is no longer offered" in form and "max iterations 10 -&gt; 2" in form
    assert 'id="fork-refusal"' not in form

    at_cap = client.get(reverse("run_fork", args=[parent.pk]), {"step": 2}).content.decode()
    assert 'id="fork-refusal"' in at_cap and "already used 2 iterations" in at_cap
    response = client.post(reverse("run_fork", args=[parent.pk]), {"step": 2, "edit": ""})
    assert response.status_code == 400
    assert "already used 2 iterations, and agent demo now allows at most 2" in " ".join(
        response.context["form"].non_field_errors())
    assert Run.objects.count() == 1 and dispatched == []

    response = client.post(reverse("run_fork", args=[parent.pk]), {"step": 1, "edit": ""})
    fork = Run.objects.get(forked_from=parent)
    assert response.status_code == 302 and "cancel_order" not in fork.config["tools"]
