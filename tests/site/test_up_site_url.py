"""`manage.py up` gives the processes it starts the address it serves on as SITE_URL when none is
set, so links in escalation e-mails and webhooks open this server, whatever its --port."""
import subprocess
import sys

import pytest
from django.core.management import call_command

from agentsite import celery as agentsite_celery
from hosting import processes
from tests.site.test_security_settings import ROOT

LINK_OF_A_NEW_PROCESS = """
import django
django.setup()
from runs.supervision.approvals.escalation import approval_link
print(approval_link(7))
"""


class StartedNothing:
    """Stands in for the process supervisor: records what `up` would start, starts nothing."""

    started: dict = {}

    def start(self, name, args, env):
        StartedNothing.started[name] = {"args": args, "env": env}

    def adopt(self, name, proc):
        pass

    def wait(self):
        return 0


@pytest.fixture
def up(monkeypatch, settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "staticfiles"  # what `up` collects goes here, not in the checkout
    monkeypatch.setattr(processes, "Supervisor", StartedNothing)
    StartedNothing.started = {}

    def run(*args, **environ):
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        with pytest.raises(SystemExit):
            call_command("up", *args)
        return StartedNothing.started

    return run


@pytest.mark.worker  # a process of its own reads the link
@pytest.mark.django_db
def test_links_in_notifications_open_the_port_up_serves_on(up, monkeypatch, capsys):
    monkeypatch.delenv("SITE_URL", raising=False)
    started = up("--port", "8765")
    assert {started["web"]["env"]["SITE_URL"], started["worker"]["env"]["SITE_URL"]} == {"http://127.0.0.1:8765"}
    assert "Links in notifications: http://127.0.0.1:8765" in capsys.readouterr().out
    # What a process started with that environment really puts in an escalation e-mail.
    child = subprocess.run([sys.executable, "-c", LINK_OF_A_NEW_PROCESS], cwd=ROOT, env=started["worker"]["env"],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip().splitlines()[-1] == "http://127.0.0.1:8765/approvals/7/"


@pytest.mark.django_db
def test_a_site_url_the_operator_set_is_kept(up):
    started = up("--port", "8765", SITE_URL="https://agents.example.com")
    assert started["web"]["env"]["SITE_URL"] == "https://agents.example.com"


def test_a_wildcard_address_links_to_the_machine_not_to_nowhere(monkeypatch):
    monkeypatch.setattr(processes.socket, "getfqdn", lambda: "agents.internal")
    assert processes.site_url_for("0.0.0.0", 9000) == "http://agents.internal:9000"
    assert processes.site_url_for("::", 9000) == "http://agents.internal:9000"
    assert processes.site_url_for("::1", 9000) == "http://[::1]:9000"


def test_a_worker_started_without_site_url_says_its_links_open_only_this_machine(settings):
    settings.SITE_URL_IS_SET, settings.SITE_URL = False, "http://127.0.0.1:8000"
    assert "SITE_URL is not set" in agentsite_celery.site_url_warning(settings)
    settings.SITE_URL_IS_SET = True
    assert agentsite_celery.site_url_warning(settings) is None


@pytest.mark.django_db
def test_up_collects_the_static_files_readable_by_all_and_writable_by_none_else(up, settings, monkeypatch):
    import os

    before = os.umask(0)  # the laxest umask: the modes must not depend on it
    try:
        up("--port", "8765")
    finally:
        os.umask(before)
    root = settings.STATIC_ROOT
    css = root / "css" / "app.css"
    assert css.read_text() == (ROOT / "static" / "css" / "app.css").read_text()
    assert oct(css.stat().st_mode & 0o777) == "0o644" and oct((root / "css").stat().st_mode & 0o777) == "0o755"


@pytest.mark.django_db
def test_up_gives_the_demo_model_a_watchable_pace_unless_told_otherwise(up, monkeypatch):
    monkeypatch.delenv("DEMO_MODEL_PACE", raising=False)
    assert up("--port", "8765")["worker"]["env"]["DEMO_MODEL_PACE"] == "realistic"
    assert up("--port", "8765", DEMO_MODEL_PACE="instant")["worker"]["env"]["DEMO_MODEL_PACE"] == "instant"
