"""A replay of a step's request is spending: the budgets covering its run refuse it in words when
reached (before any model is asked) and count what it spent from then on, for later replays and
runs alike; one person has at most REPLAYS_AT_ONCE replays in flight (over real HTTP, against a
model that answers when the test lets it); each replay is listed on the run page and in the audit
log with who asked which models and what it cost."""
import json
import threading
from http.server import BaseHTTPRequestHandler

import pytest
import requests
from django.test import Client
from django.urls import reverse

from accounts.services import api_token_create
from audit.models import AuditEntry
from runs.controls.budgets import budgets_used
from runs.lifecycle.agents import agent_save
from runs.models import Agent, Budget, BudgetHold, Run, StepReplay
from tests.projects import project
from tests.support.approval_fixtures import make_user
from tests.tools.local_http import LocalServer


@pytest.fixture
def otto(demo_data):
    return make_user("otto_s", "operators")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def budget(measure: str, limit: float) -> Budget:
    return Budget.objects.create(name="Replays", measure=measure, period="day", limit=limit,
                                 project_id=Agent.objects.get(name="demo").project_id)


def replay_page(client, run, step: int, *models):
    return client.post(reverse("step_replay", args=[run.pk]), {"step": step, "models": "\n".join(models)})


def test_a_reached_budget_refuses_a_replay_in_words_and_no_model_is_asked(launch, script, otto):
    run = launch("hi", models=[script({"content": "hello", "usage": {"prompt_tokens": 300, "completion_tokens": 20}})])
    budget("tokens", 320)  # the run itself used it up
    other = script({"content": "an answer never asked for"})
    page = replay_page(signed_in(otto), run, 1, other)
    assert page.status_code == 200 and page.context["answers"] is None
    assert "Budget reached: Replays, 320 tokens a day. A replay spends from it too, so no model was asked" \
        in page.content.decode()
    assert script.requests(other) == []
    assert not StepReplay.objects.exists()


def test_a_replays_tokens_and_cost_count_in_the_budgets_and_hold_a_later_run(launch, script, otto):
    run = launch("hi", models=[script({"content": "hello", "usage": {"prompt_tokens": 300, "completion_tokens": 20}})])
    tokens, cost = budget("tokens", 1000), budget("cost", 5)
    before = budgets_used([tokens, cost])
    costly = script({"content": "a long answer", "usage": {"prompt_tokens": 600, "completion_tokens": 150, "cost": 2.5}})
    page = replay_page(signed_in(otto), run, 1, costly)
    assert page.context["answers"][0].ok
    after = budgets_used([tokens, cost])
    assert after[tokens.pk] == before[tokens.pk] + 750 == 1070
    assert after[cost.pk] == pytest.approx(before[cost.pk] + 2.5)
    # The tokens budget is now passed: the next replay is refused, and a new run waits on it.
    again = replay_page(signed_in(otto), run, 1, script({"content": "never asked"}))
    assert again.context["answers"] is None and "Budget reached: Replays, 1,000 tokens a day" in again.content.decode()
    later = launch("hi again", models=[script({"content": "never asked either"})])
    assert later.status == Run.Status.QUEUED
    assert BudgetHold.objects.get(run=later).sentence == "Budget reached: Replays, 1,000 tokens a day"



def test_a_replay_of_another_projects_run_spends_from_that_projects_budgets_only(launch, script, otto):
    beta = project("Beta")
    agent_save(agent=None, data={"name": "beta-bot"}, project=beta)
    theirs = launch("hi", agent="beta-bot", models=[script({"content": "hello"})])
    ours = budget("tokens", 1000)  # the demo project's
    before = budgets_used([ours])[ours.pk]
    costly = script({"content": "a long answer", "usage": {"prompt_tokens": 900, "completion_tokens": 150}})
    assert replay_page(signed_in(otto), theirs, 1, costly).context["answers"][0].ok
    assert budgets_used([ours])[ours.pk] == before
    # The demo project's people still launch: Beta's spending is not theirs.
    later = launch("hi again", models=[script({"content": "answered"})])
    assert later.status == Run.Status.SUCCEEDED and not BudgetHold.objects.filter(run=later).exists()

def test_the_replay_is_listed_on_the_run_page_and_in_the_audit_log(launch, script, otto):
    run = launch("hi", models=[script({"content": "hello"})])
    client = signed_in(otto)
    assert 'id="run-replays"' not in client.get(reverse("run_detail", args=[run.pk])).content.decode()
    first = script({"content": "one", "usage": {"prompt_tokens": 1000, "completion_tokens": 234, "cost": 0.0125}})
    second = script({"status": 500, "error": "overloaded", "repeat": True, "headers": {"Retry-After": "0"}})
    replay_page(client, run, 1, first, second)

    record = StepReplay.objects.get()
    assert (record.run_id, record.step_index, record.user_name, record.models_asked) == (run.pk, 1, "otto_s", [first, second])
    assert (record.tokens_in, record.tokens_out, record.cost_usd) == (1000, 234, 0.0125) and record.finished_at
    html = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    listed = html.split('id="run-replays"')[1].split("</section>")[0]
    assert "otto_s" in listed and "step 1" in listed and f"{first}, {second}" in listed
    assert "1,234 tokens" in listed and "$0.012500" in listed

    entry = AuditEntry.objects.get(kind="step replay")
    assert (entry.actor_name, entry.via, entry.object_repr) == ("otto_s", "page", f"Run {run.pk}, step 1")
    assert entry.after == {"run": run.pk, "step": 1, "models": [first, second], "answered": [first],
                           "tokens_in": 1000, "tokens_out": 234, "cost_usd": 0.0125}
    admin = signed_in(make_user("ada_s", "admins"))
    assert f"Run {run.pk}, step 1" in admin.get(reverse("audit_list"), {"kind": "step replay"}).content.decode()


class HeldModel(LocalServer):
    """An OpenAI-compatible server whose answers wait until the test lets them go."""

    def __init__(self):
        self.arrived = threading.Condition()
        self.count = 0
        self.released = threading.Event()
        held = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with held.arrived:
                    held.count += 1
                    held.arrived.notify_all()
                held.released.wait(30)
                answer = json.dumps({
                    "id": "held", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "let go"}}],
                    "usage": {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.serve(Handler)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def wait_for(self, count: int) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: self.count >= count, 30), f"{self.count} of {count} requests came"


@pytest.fixture
def held_model():
    server = HeldModel()
    yield server
    server.released.set()
    server.stop()


def test_a_person_has_at_most_two_replays_in_flight_and_a_slot_is_given_back_however_it_ends(
        launch, script, otto, live_server, settings, held_model):
    settings.REPLAYS_AT_ONCE = 2
    run = launch("hi", models=[script({"content": "hello"})])
    settings.DEMO_MODEL_URL = held_model.url  # the run's endpoint (the demo model's) now holds its answers
    olga = make_user("olga_s", "operators")
    keys = {user.username: api_token_create(user=user)[1] for user in (otto, olga)}
    url = f"{live_server.url}/api/v1/runs/{run.pk}/steps/1/replay/"

    def replay(who: str, model: str) -> requests.Response:
        return requests.post(url, json={"models": [model]}, headers={"Authorization": f"Token {keys[who]}"}, timeout=60)

    answers = {}

    def in_flight(who: str, model: str) -> threading.Thread:
        thread = threading.Thread(target=lambda: answers.setdefault(model, replay(who, model)))
        thread.start()
        return thread

    threads = [in_flight("otto_s", "held-1"), in_flight("otto_s", "held-2")]
    held_model.wait_for(2)
    third = replay("otto_s", "held-3")
    assert third.status_code == 429
    assert third.json()["detail"] == ("You already have 2 replays in flight, the most one person may run at once: "
                                      "wait for one to finish, then replay again.")
    page = replay_page(signed_in(otto), run, 1, "held-4")
    assert page.context["answers"] is None and "You already have 2 replays in flight" in page.content.decode()
    threads.append(in_flight("olga_s", "held-5"))  # another person's replays are theirs to count
    held_model.wait_for(3)
    held_model.released.set()
    for thread in threads:
        thread.join(60)
    assert {model: answer.status_code for model, answer in answers.items()} == {"held-1": 200, "held-2": 200, "held-5": 200}
    assert held_model.count == 3  # the refused ones asked no model
    assert replay("otto_s", "held-6").status_code == 200  # both slots were given back

    settings.REPLAYS_AT_ONCE = 1
    Run.objects.filter(pk=run.pk).update(config={**run.config, "context_budget": 5})
    refused = replay("otto_s", "held-7")
    assert refused.status_code == 400 and "no longer fits the run's context budget" in refused.json()["detail"]
    Run.objects.filter(pk=run.pk).update(config=run.config)
    assert replay("otto_s", "held-8").status_code == 200  # the refused replay gave its slot back
