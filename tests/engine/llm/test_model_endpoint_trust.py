"""Who may point a run at a model endpoint, and which endpoints get LLM_API_KEY.

A --base-url typed at the host's shell (run_agent) is the host operator's, trusted like
LLM_BASE_URL; the same URL typed in the API stays behind the outbound guard. LLM_API_KEY goes only
to the host of LLM_BASE_URL and the hosts of LLM_API_KEY_HOSTS. Real servers on 127.0.0.x.
"""
import json
from http.server import BaseHTTPRequestHandler
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from runs.engine.loop import run_advance
from runs.lifecycle import launch as launch_module
from runs.models import Run
from tests.support.approval_fixtures import make_user
from tests.tools.local_http import LocalServer

KEY = "sk-live-operator-key-4f2a9c"


class ChatServer(LocalServer):
    """An OpenAI-compatible chat server that records each request's Authorization header."""

    def __init__(self, host="127.0.0.1", echo_error=False):
        """echo_error: answer 400 with a long error that quotes the request's Authorization."""
        self.authorizations: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.authorizations.append(self.headers.get("Authorization"))
                if echo_error:
                    body = json.dumps({"error": {"message": f"bad key {self.headers.get('Authorization')} " + "x" * 5000}})
                    return self._answer(400, body.encode())
                body = json.dumps({
                    "model": "m", "choices": [{"message": {"role": "assistant", "content": "hello from the server"},
                                               "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                }).encode()
                self._answer(200, body)

            def _answer(self, status, body):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.serve(Handler, host)
        self.url = f"http://{host}:{self.port}/v1"



@pytest.fixture
def chat_server():
    server = ChatServer()
    yield server
    server.stop()


@pytest.fixture
def other_server():
    server = ChatServer(host="127.0.0.2")
    yield server
    server.stop()


def run_agent(*args) -> dict:
    out = StringIO()
    call_command("run_agent", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


# --- run_agent --base-url is the host operator's ------------------------------------------------


def test_run_agent_base_url_on_loopback_reaches_a_local_model_server(demo_data, demo_server, script):
    # The project's demo model on 127.0.0.1: what `run_agent --base-url http://127.0.0.1:8080/v1`
    # against a local llama.cpp server does. No allowlist entry is needed.
    model = script({"content": "answered from the local server"})
    data = run_agent("hello", "--base-url", demo_server.url, "--model", model)
    assert (data["status"], data["answer"]) == (Run.Status.SUCCEEDED, "answered from the local server")
    assert Run.objects.get(pk=data["run_id"]).config["base_url"] == demo_server.url


def test_the_same_base_url_sent_to_the_api_is_refused_by_the_guard(demo_data, demo_server, script, monkeypatch):
    monkeypatch.setattr(launch_module, "run_dispatch", lambda run_id: None)  # driven here, below
    model = script({"content": "must never be asked"})
    client = APIClient()
    client.force_authenticate(make_user("ada", "admins"))
    response = client.post("/api/v1/agents/", {
        "name": "local", "system_prompt": "x", "model_list": [model], "base_url": demo_server.url, "tools": [],
    }, format="json")
    assert response.status_code == 201, response.content
    launched = client.post("/api/v1/runs/", {"agent": "local", "task": "hello"}, format="json")
    assert launched.status_code == 201, launched.content
    run_advance(run_id=launched.json()["run_id"])
    run = Run.objects.get(pk=launched.json()["run_id"])
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert "refused" in run.stop_detail and "127.0.0.1" in run.stop_detail
    assert "base_url_from_shell" not in run.config


def test_a_rerun_of_a_shell_launched_run_does_not_inherit_the_trust(demo_data, demo_server, script):
    from runs.lifecycle.runs import run_create

    model = script({"content": "first"})
    data = run_agent("hello", "--base-url", demo_server.url, "--model", model)
    original = Run.objects.get(pk=data["run_id"])
    rerun = run_create(agent=original.agent, task=original.task, overrides=original.overrides, rerun_of=original)
    run_advance(run_id=rerun.pk)
    rerun.refresh_from_db()
    assert rerun.stop_reason == Run.StopReason.MODEL_ERROR and "refused" in rerun.stop_detail


# --- LLM_API_KEY goes only to the hosts the operator allowed ------------------------------------


def test_the_api_key_goes_to_llm_base_url_but_not_to_an_agents_other_endpoint(
    launch, settings, chat_server, other_server
):
    settings.LLM_BASE_URL, settings.LLM_API_KEY, settings.LLM_MODELS = chat_server.url, KEY, ["m"]
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.2:{other_server.port}"]  # reachable, but not trusted with the key

    run = launch("hello")
    assert run.status == Run.Status.SUCCEEDED
    assert chat_server.authorizations == [f"Bearer {KEY}"]

    run = launch("hello", base_url=other_server.url)
    assert run.status == Run.Status.SUCCEEDED  # it answers; it just never saw the key
    assert other_server.authorizations and all(KEY not in (a or "") for a in other_server.authorizations)

    settings.LLM_API_KEY_HOSTS = ["127.0.0.2"]
    launch("hello", base_url=other_server.url)
    assert other_server.authorizations[-1] == f"Bearer {KEY}"


def test_a_model_error_body_echoing_the_key_is_bounded_and_blanked(launch, settings):
    echo = ChatServer(echo_error=True)
    settings.LLM_BASE_URL, settings.LLM_API_KEY, settings.LLM_MODELS = echo.url, KEY, ["m"]
    settings.LLM_MAX_RETRIES = 0
    try:
        run = launch("hello")
    finally:
        echo.stop()
    assert run.stop_reason == Run.StopReason.MODEL_ERROR
    assert "Bearer ••••" in run.stop_detail and KEY not in run.stop_detail
    assert len(run.stop_detail) < 1000
