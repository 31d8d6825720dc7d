"""Each TOOL_SECRET_* goes only to the hosts TOOL_SECRET_HOSTS lists for it; real servers on 127.0.0.x."""
import os
import subprocess
import sys
from pathlib import Path

from django.urls import reverse

from tests.support.approval_fixtures import make_user
from tests.tools.test_http_tools import SCHEMA, http_tool, run_with_call, tool_server  # noqa: F401
from toolsapp.models import Tool

ROOT = Path(__file__).resolve().parents[2]
SECRET = "crm-secret-7d1e0b"


def with_secret(tool: Tool, name="TOOL_SECRET_CRM") -> Tool:
    tool.config["secret_env"] = name
    tool.save()
    return tool


def test_a_secret_not_allowed_for_the_host_is_never_sent(launch, script, tool_server, settings, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TOOL_SECRET_CRM", SECRET)
    settings.TOOL_SECRET_HOSTS = {"TOOL_SECRET_CRM": ["crm.example.com"]}
    tool = with_secret(http_tool(tool_server.url + "/stock"))

    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})

    assert result["ok"] is False
    assert "TOOL_SECRET_CRM may be sent only to crm.example.com, not to 127.0.0.1" in result["error"]
    assert tool_server.requests == []  # nothing at all was sent


def test_a_secret_no_host_is_listed_for_goes_nowhere(launch, script, tool_server, settings, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TOOL_SECRET_OTHER", SECRET)
    settings.TOOL_SECRET_HOSTS = {"TOOL_SECRET_CRM": ["127.0.0.1"]}
    tool = with_secret(http_tool(tool_server.url + "/stock"), "TOOL_SECRET_OTHER")
    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})
    assert result["ok"] is False and "TOOL_SECRET_HOSTS does not list it" in result["error"]
    assert tool_server.requests == []


def test_host_patterns(settings):
    from toolsapp.executors.http import secret_host_error

    settings.TOOL_SECRET_HOSTS = {"TOOL_SECRET_CRM": ["api.example.com", "*.example.org"]}
    allowed = {
        url: secret_host_error(url, "TOOL_SECRET_CRM") is None
        for url in ["https://api.example.com/x", "https://API.example.com./x", "https://eu.api.example.org/x",
                    "https://example.org/x", "https://api.example.com.evil.net/x", "https://evilexample.org/x"]
    }
    assert allowed == {
        "https://api.example.com/x": True, "https://API.example.com./x": True, "https://eu.api.example.org/x": True,
        "https://example.org/x": False, "https://api.example.com.evil.net/x": False, "https://evilexample.org/x": False,
    }


def test_the_tool_form_warns_when_the_secret_may_not_go_to_the_url(client, demo_data, settings):
    settings.TOOL_SECRET_HOSTS = {"TOOL_SECRET_CRM": ["crm.example.com"]}
    client.force_login(make_user("ada", "admins"))
    form = {"name": "crm", "description": "d", "parameters": '{"type": "object"}', "timeout_seconds": "5",
            "kind": "http", "url": "https://elsewhere.example.net/hook", "secret_env": "TOOL_SECRET_CRM", "enabled": "on"}
    page = client.post(reverse("tool_create"), form, follow=True).content.decode()
    assert "TOOL_SECRET_CRM may be sent only to crm.example.com, not to elsewhere.example.net" in page
    page = client.post(reverse("tool_edit", args=[Tool.objects.get(name="crm").pk]),
                       {**form, "url": "https://crm.example.com/hook"}, follow=True).content.decode()
    assert "may be sent only to" not in page


def test_a_malformed_tool_secret_hosts_stops_the_process_at_start():
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings",
             "TOOL_SECRET_HOSTS": '{"DJANGO_SECRET_KEY": ["x.example"], "TOOL_SECRET_A": "a.example"}'},
    )
    assert started.returncode != 0
    assert "TOOL_SECRET_HOSTS is malformed" in started.stderr and "'DJANGO_SECRET_KEY' does not start" in started.stderr
    assert "TOOL_SECRET_A: a list of host names" in started.stderr
