"""Shared fixtures: the demo model over real HTTP, demo data, and helpers to launch runs."""
import uuid

import pytest
from django.apps import apps as django_apps

from runs.demo_model import start_server

# alice, bob (operators), viewer and no_dispatch, for the approval tests.
pytest_plugins = ["tests.support.approval_fixtures"]


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
    importlib.import_module("runs.migrations.0002_demo_agent").create(django_apps, None)
    from django.contrib.auth.models import Group, Permission

    from runs.roles import ensure_roles

    ensure_roles(Group, Permission)


@pytest.fixture
def script(demo_server):
    """script(entry, entry, ...) -> a model name that answers with those entries in order."""

    def make(*responses, latency: float = 0.0) -> str:
        return demo_server.create_script(list(responses), latency)["model"]

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
