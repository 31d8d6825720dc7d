"""An agent with the memory tools, runs of it for a customer, and a way to save facts directly."""
import pytest

from memory.services import memory_save
from runs.models import Agent, Run
from toolsapp.models import Tool


@pytest.fixture
def memo_agent(db):
    """An agent whose runs may save and search facts (the tools' rows may be gone: a transactional
    test empties the database, so they are made again from the migration's own list)."""
    import importlib

    from django.apps import apps

    importlib.import_module("toolsapp.migrations.0008_context_and_memory_tools").create(apps, None)
    agent = Agent.objects.create(name="memo", summarize_on_stop=False)
    agent.tools.set(Tool.objects.filter(name__in=["save_memory", "search_memory"]))
    return agent


@pytest.fixture
def run_for(memo_agent):
    """run_for(customer="", agent=memo_agent) -> a run (its rows only, nothing drives it)."""

    def make(customer: str = "", agent: Agent | None = None) -> Run:
        return Run.objects.create(agent=agent or memo_agent, task="remember things", customer=customer)

    return make


@pytest.fixture
def save(run_for):
    """save(text, customer="", key="", run=None) -> the saved Memory (created or found)."""
    counter = iter(range(1, 1_000_000))

    def go(text: str, customer: str = "", key: str | None = None, run: Run | None = None):
        run = run or run_for(customer)
        key = f"test-key-{next(counter)}" if key is None else key
        return memory_save(run_id=run.pk, customer=customer, text=text, idempotency_key=key).memory

    return go
