"""Fixtures of the browser tests: a live ASGI server, a real worker, Chromium, users per role.

The stack is what production runs: a `daphne` subprocess serving agentsite.asgi (pages and
websockets) and a `celery worker` subprocess (threads pool), both opening the test database and
sharing one Redis database of the session's private Redis (tests/conftest.py) as Celery
broker and channels layer, so a run launched in the browser is queued by daphne, driven by the
worker, and its events reach the page through daphne's websocket. The model is the session's
demo model server over HTTP.

Both processes start once for this package (Django and Celery take seconds to import) and serve
every test; the tests are transactional (the processes only see committed rows) and each one
ends by stopping whatever runs are still active, so nothing writes while the database is
emptied for the next test.
"""
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest
import redis as redis_lib
from django.db import close_old_connections, connections

from tests.browser import CHROMIUM, PASSWORD, TIMEOUT_MS, screenshot_dir
from tests.conftest import (
    ROOT,
    WorkerProc,
    free_port,
    use_broker,
    wait_until,
    worker_database_env,
)

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# Database 0 of the private Redis: the per-test `broker` fixture only hands out 1..15.
LIVE_REDIS_DB = 0
ROLE_GROUPS = {"viewer": "viewers", "operator": "operators", "operator2": "operators", "admin": "admins"}


def child_env(*, redis_url: str, demo_model_url: str, **extra) -> dict:
    """The environment of daphne and the worker: the test database, one Redis, the demo model."""
    env = dict(os.environ)
    overrides = {
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "REDIS_URL": redis_url,
        "DEMO_MODEL_URL": demo_model_url,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        # Run pages catch up in parts of 2 events, so every page load goes through "more" (and a
        # long run through the resume rate limit).
        "RUN_TIMELINE_RESUME_EVENTS": "2",
        "LLM_API_KEY": "",
        "LLM_BASE_URL": "",
        "LLM_MODELS": "",
        "LLM_MAX_RETRIES": "0",
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "DJANGO_ALLOW_ASYNC_UNSAFE": None,  # the children keep Django's safety check
        "PYTHONUNBUFFERED": "1",
        **worker_database_env(),
        **extra,
    }
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


class LiveServer:
    """A daphne subprocess serving agentsite.asgi:application."""

    def __init__(self, env: dict, log_path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "agentsite.asgi:application"]
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float = 60.0) -> "LiveServer":
        """Until the login page answers 200 (Django imported, database reachable)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"daphne exited with status {self.proc.returncode}:\n{self.log()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/login/", timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        pytest.fail(f"daphne did not answer within {timeout:g} s:\n{self.log()[-4000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class LiveStack:
    def __init__(self, server: LiveServer, worker: WorkerProc, redis_url: str):
        self.server = server
        self.worker = worker
        self.redis_url = redis_url

    @property
    def url(self) -> str:
        return self.server.url

    def logs(self) -> str:
        return (
            f"--- daphne log tail:\n{self.server.log()[-3000:]}\n"
            f"--- worker (alive={self.worker.alive}) log tail:\n{self.worker.log()[-3000:]}"
        )


@pytest.fixture(scope="package")
def live_stack(django_db_setup, redis_server, demo_server, tmp_path_factory):
    """daphne + a Celery worker on the test database, started once for the browser tests."""
    from tests.notifications.test_notifications import Receiver

    redis_url = redis_server.url(LIVE_REDIS_DB)
    redis_lib.Redis.from_url(redis_url).flushdb()
    # A webhook receiver both processes may reach (the SSRF guard refuses 127.0.0.1 otherwise).
    hooks = Receiver()
    env = child_env(redis_url=redis_url, demo_model_url=demo_server.url, OUTBOUND_ALLOWLIST=f"127.0.0.1:{hooks.port}")
    logs = tmp_path_factory.mktemp("live")

    server = LiveServer(env, logs / "daphne.log")
    worker_args = [
        sys.executable, "-m", "celery", "-A", "agentsite", "worker",
        "--pool", "threads", "--concurrency", "4", "--loglevel", "INFO",
        "-n", f"browser-{os.getpid()}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]
    with open(logs / "worker.log", "ab") as log:
        proc = subprocess.Popen(worker_args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    worker = WorkerProc(proc, logs / "worker.log", "browser-worker")
    try:
        server.wait_ready()  # both start at once: each takes a few seconds to import Django
        worker.wait_ready()
        stack = LiveStack(server, worker, redis_url)
        stack.hooks = hooks
        yield stack
    finally:
        hooks.stop()
        # Before the test database is dropped: PostgreSQL refuses while they hold connections.
        worker.stop()
        server.stop()


def runs_quiesce(stack: LiveStack) -> None:
    """Stop every active run and wait until no worker drives one, so the database can be emptied."""
    from runs.lifecycle.runs import run_cancel
    from runs.models import Run

    for run in Run.objects.filter(status__in=Run.ACTIVE_STATUSES):
        run_cancel(run=run)

    def idle() -> bool:
        return not (
            Run.objects.filter(status__in=Run.ACTIVE_STATUSES).exists() or Run.objects.exclude(lease_owner="").exists()
        )

    wait_until(idle, timeout=60, message=lambda: "the worker to let go of every run\n" + stack.logs())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    # Keep each phase's report on the test, so fixtures can tell at teardown that it failed.
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def _failed(request) -> bool:
    report = getattr(request.node, "rep_call", None)
    return report is None or report.failed


@pytest.fixture
def live(live_stack, demo_data, request):
    """The live stack, with the demo tools and agent in the database; idle again afterwards."""
    from agentsite.celery import app

    before = app.conf.broker_url
    use_broker(live_stack.redis_url)  # a run dispatched by this process goes to the live worker
    yield live_stack
    try:
        runs_quiesce(live_stack)
    finally:
        use_broker(before)
        if _failed(request):
            print(live_stack.logs())
        close_old_connections()


class Users(dict):
    """users["viewer" | "operator" | "operator2" | "admin"]: created at first use (hashing a
    password takes a while), each with PASSWORD and the group of its role."""

    def __missing__(self, role: str):
        from django.contrib.auth.models import Group, User

        user = User.objects.create_user(username=role, password=PASSWORD)
        user.groups.add(Group.objects.get(name=ROLE_GROUPS[role]))
        self[role] = user
        return user


@pytest.fixture
def users(demo_data):
    return Users()


class Browser:
    """One Chromium per test. Each login() is a new browser context: a person with own cookies."""

    def __init__(self, chromium, base_url: str):
        self.chromium = chromium
        self.base_url = base_url
        self.pages = []
        self.errors: list[str] = []

    def _watch(self, page):
        self.pages.append(page)
        page.on("pageerror", lambda error: self.errors.append(f"{page.url}: {error}"))
        return page

    def login(self, user, *, timezone_id=None):
        """A new context signed in as `user` through the real login form (its clock in
        `timezone_id`, an IANA name, when given); returns its page."""
        from playwright.sync_api import expect

        zone = {"timezone_id": timezone_id} if timezone_id else {}
        context = self.chromium.new_context(base_url=self.base_url, viewport={"width": 1280, "height": 900}, **zone)
        context.set_default_timeout(TIMEOUT_MS)
        page = self._watch(context.new_page())
        page.goto("/login/")
        page.locator("input[name=username]").fill(user.username)
        page.locator("input[name=password]").fill(PASSWORD)
        page.locator("main form button[type=submit]").click()
        expect(page.locator("header .who")).to_contain_text(user.username)
        return page

    def tab(self, page):
        """Another tab of the same person."""
        return self._watch(page.context.new_page())


@contextmanager
def chromium_session(url: str, monkeypatch, request, tmp_path):
    """Chromium driven by Playwright's sync API, against the site at `url` (every browser fixture).

    The sync API runs an asyncio event loop in a greenlet of this (the main) thread from
    start() to stop(), so Django sees "a running event loop" and refuses synchronous ORM calls
    (SynchronousOnlyOperation) in the test body and in fixtures. The check is a false alarm
    here: that loop only runs while a Playwright call is waiting, never while our code runs, so
    a blocking query cannot stall it. DJANGO_ALLOW_ASYNC_UNSAFE turns the check off, but only
    while Playwright runs (monkeypatch restores it after this fixture stops Playwright, before
    the database is emptied), so the consumer tests of the same session keep the check.
    Running Playwright in a thread of its own would avoid the flag, at the price of handing
    every page call to that thread.
    """
    from playwright.sync_api import expect, sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    expect.set_options(timeout=TIMEOUT_MS)
    playwright = sync_playwright().start()
    session = None
    try:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        session = Browser(chromium, url)
        yield session
        if _failed(request):
            # What each page showed when the test failed: in $SCREENSHOT_DIR when set, else in
            # the test's own temporary directory (never in the checkout).
            where = screenshot_dir() or tmp_path
            for n, page in enumerate(session.pages):
                if not page.is_closed():
                    page.screenshot(path=str(where / f"failed-{request.node.name}-{n}.png"), full_page=True)
            print(f"screenshots of the failed test's pages: {where}/failed-{request.node.name}-*.png")
        chromium.close()
    finally:
        # While Playwright's loop runs, Django keeps this thread's connections in a separate,
        # context-local slot (asgiref's Local, thread_critical): close them now, or that
        # connection stays checked out of the PostgreSQL pool after Playwright stops and the
        # test database cannot be dropped at the end of the session.
        connections.close_all()
        playwright.stop()
    if session is not None and session.errors:
        pytest.fail("JavaScript errors in the pages:\n" + "\n".join(session.errors))


@pytest.fixture
def browser(live, monkeypatch, request, tmp_path):
    """Chromium against the live server."""
    with chromium_session(live.url, monkeypatch, request, tmp_path) as session:
        yield session


@pytest.fixture
def slow_demo_model(demo_server):
    """The demo model answers each request after `seconds` (so a run lasts long enough to watch)."""
    before = demo_server.latency

    def set_latency(seconds: float):
        demo_server.latency = seconds

    yield set_latency
    demo_server.latency = before
