"""Shared fixtures: the demo model over real HTTP, demo data, and helpers to launch runs."""
import uuid

import pytest
from django.apps import apps as django_apps

from runs.demo_model import start_server
from tests.support import fast_flush

fast_flush.install()  # PostgreSQL: transactional tests end with DELETE, not TRUNCATE (why: there)

# alice, bob (operators), viewer and no_dispatch, for the approval tests.
pytest_plugins = ["tests.support.approval_fixtures"]

# The markers follow from the fixtures a test uses, wherever its file lives: a test that drives
# Chromium is `browser`, one that starts a Celery worker (or the daphne/worker stack of the
# browser tests) is `worker`, so `-m "not browser and not worker"` leaves out every such test.
BROWSER_FIXTURES = {"browser", "live", "live_stack", "sso_site"}
WORKER_FIXTURES = {"celery_worker_proc", "live_stack", "sso_site"}


def _database_use(item) -> str:
    """"transactional", "db" or "none", as pytest-django sorts tests (that order, below)."""
    used = set(getattr(item, "fixturenames", ()))
    mark = item.get_closest_marker("django_db")
    if "transactional_db" in used or "live_server" in used or (mark and mark.kwargs.get("transaction")):
        return "transactional"
    return "db" if (mark or "db" in used) else "none"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks it adds
def pytest_collection_modifyitems(config, items):
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if used & WORKER_FIXTURES:
            item.add_marker(pytest.mark.worker)
        # Under `pytest -n N --dist loadgroup` (./test) tests are handed out one by one, in
        # pytest-django's order (tests in a transaction first, then transactional ones, whose
        # flush also deletes the groups and demo data the migrations installed), so every worker
        # keeps that order. The tests of a module that share a module-scoped fixture (a server
        # process) stay on one worker, so it starts once; split by database use, to keep the order.
        # Likewise the tests of a package sharing a package-scoped one (the browser tests' daphne
        # and Celery worker): one stack a pass, not one on every worker.
        fixturedefs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        scopes = {defs[-1].scope for defs in fixturedefs.values() if defs}
        if "package" in scopes:
            package = item.nodeid.split("::")[0].rsplit("/", 1)[0]
            item.add_marker(pytest.mark.xdist_group(f"{package}/:{_database_use(item)}"))
        elif "module" in scopes:
            item.add_marker(pytest.mark.xdist_group(f"{item.nodeid.split('::')[0]}:{_database_use(item)}"))


@pytest.fixture(scope="session")
def demo_server():
    server = start_server()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _use_demo_model(settings, demo_server):
    # Tests never reach a real provider: every request goes to the demo model over HTTP.
    settings.DEMO_MODEL_URL = demo_server.url
    settings.LLM_API_KEY = ""
    settings.LLM_BASE_URL = ""
    settings.LLM_MODELS = []
    settings.LLM_MAX_RETRIES = 2
    # An ended run is counted into the metrics rollups right after its ending commits, in the
    # thread that ended it, so a test reads them at once (the workers it starts count in batches).
    settings.ROLLUP_COUNT_DELAY_SECONDS = 0


@pytest.fixture(autouse=True)
def _fast_password_hasher(request, settings):
    # Django's PBKDF2 costs ~0.3 s of CPU per password set or checked, the bulk of the suite's CPU
    # time. A test whose passwords only this process checks uses MD5 instead; browser and worker
    # tests keep the real hasher: daphne and the workers they start check those passwords too.
    if not (request.node.get_closest_marker("browser") or request.node.get_closest_marker("worker")):
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _budgets_read_afresh():
    # Budgets are read once every 2 s per process; a test's database is emptied without signals,
    # so the next test must not see the last one's budgets.
    from runs.controls.budgets import budgets_forget

    budgets_forget()
    yield
    budgets_forget()


@pytest.fixture(autouse=True)
def _own_cache(settings):
    # Each test starts with an empty cache (sign-in failure counts above all) without flushing
    # the Redis database the broker shares: its keys get a prefix of their own.
    settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}}


@pytest.fixture
def demo_data(transactional_db):
    """The tools, sample data and demo agent that the data migrations install.

    Transactional tests empty the database after each test, so they are loaded again here.
    """
    import importlib

    importlib.import_module("toolsapp.migrations.0002_demo_tools").create(django_apps, None)
    importlib.import_module("toolsapp.migrations.0008_context_and_memory_tools").create(django_apps, None)
    # The demo shop's cancel_order: twins on the same order, and lookup_order as its state check.
    importlib.import_module("toolsapp.migrations.0011_decision_evidence").demo_shop_checks(django_apps, None)
    importlib.import_module("runs.migrations.0002_demo_agent").create(django_apps, None)
    from django.contrib.auth.models import Group, Permission

    from runs.roles import ensure_roles

    ensure_roles(Group, Permission)


@pytest.fixture
def script(demo_server):
    """script(entry, entry, ...) -> a model name that answers with those entries in order."""

    def make(*responses, latency: float = 0.0, streaming: str = "stream", context_window: int | None = None) -> str:
        return demo_server.create_script(list(responses), latency, streaming=streaming,
                                         context_window=context_window)["model"]

    make.requests = lambda model: demo_server.script_requests(model.split(":", 1)[1])
    return make


@pytest.fixture
def launch(demo_data):
    """launch(task, models=[...], agent="demo", **overrides) -> the run after the loop stopped."""
    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create
    from runs.models import Agent

    def go(task="What's the weather in Lagos and London?", *, agent="demo", approval_policy="ask", customer=None, **overrides):
        run = run_create(
            agent=Agent.objects.get(name=agent),
            task=task,
            overrides=overrides,
            approval_policy=approval_policy,
            customer=customer,
        )
        run_advance(run_id=run.pk)
        run.refresh_from_db()
        return run

    return go
