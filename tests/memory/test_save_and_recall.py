"""Saving and reading facts, as the tools' handlers do: bounded per scope (a full memory refuses,
never evicts), idempotent, and every read recorded against the run that read."""
import pytest

from memory.models import Memory, MemoryRead
from memory.services import MemoryRefused, memory_recall, memory_save
from memory.tools import save_memory, search_memory
from toolsapp.executors.base import ToolContext, ToolError

pytestmark = pytest.mark.django_db


def context(run, key="key-1") -> ToolContext:
    return ToolContext(run_id=run.pk, call_id="c1", idempotency_key=key, customer=run.customer)


def test_a_full_scope_refuses_a_new_fact_and_drops_none(settings, run_for):
    settings.MEMORY_MAX_FACTS = 2
    run = run_for("acme")
    for n, text in enumerate(["first fact", "second fact"]):
        memory_save(run_id=run.pk, customer="acme", text=text, idempotency_key=f"k{n}")
    with pytest.raises(MemoryRefused, match="the memory is full: it holds 2 facts"):
        memory_save(run_id=run.pk, customer="acme", text="third fact", idempotency_key="k2")
    assert sorted(Memory.objects.values_list("text", flat=True)) == ["first fact", "second fact"]
    # A fact already there is still answered, and another customer has a scope of its own.
    again = memory_save(run_id=run.pk, customer="acme", text="second fact", idempotency_key="k3")
    assert again.created is False
    other = run_for("globex")
    assert memory_save(run_id=other.pk, customer="globex", text="third fact", idempotency_key="k4").created


def test_the_tool_tells_the_model_the_memory_is_full(settings, run_for):
    settings.MEMORY_MAX_FACTS = 1
    run = run_for("acme")
    assert save_memory({"text": "only fact"}, context(run, "a"))["saved"] is True
    with pytest.raises(ToolError, match="the memory is full.*Nothing was saved"):
        save_memory({"text": "one more"}, context(run, "b"))
    assert Memory.objects.count() == 1


def test_a_retried_call_gets_its_first_fact_back(run_for):
    run = run_for("acme")
    first = save_memory({"text": "Acme pays by card"}, context(run, "same-key"))
    again = save_memory({"text": "Acme pays by card"}, context(run, "same-key"))
    assert first["saved"] is True and again["saved"] is False
    assert again["memory_id"] == first["memory_id"]
    assert Memory.objects.count() == 1


def test_the_same_text_saved_again_in_the_scope_is_returned_not_duplicated(run_for):
    run, later = run_for("acme"), run_for("acme")
    first = save_memory({"text": "  Acme pays by card  "}, context(run, "k1"))
    again = save_memory({"text": "Acme pays by card"}, context(later, "k2"))
    assert (again["saved"], again["memory_id"]) == (False, first["memory_id"])
    assert Memory.objects.get().text == "Acme pays by card"  # stored trimmed
    elsewhere = save_memory({"text": "Acme pays by card"}, context(run_for("globex"), "k3"))
    assert elsewhere["saved"] is True and Memory.objects.count() == 2


def test_a_fact_too_short_once_trimmed_is_refused(run_for):
    with pytest.raises(ToolError, match="3 to 1000 characters"):
        save_memory({"text": "  a  "}, context(run_for()))


def test_a_saved_fact_names_the_run_that_wrote_it_and_is_json(run_for):
    run = run_for("acme")
    result = save_memory({"text": "Acme closes on Fridays"}, context(run))
    assert set(result) == {"memory_id", "text", "saved_at", "saved"}
    fact = Memory.objects.get()
    assert (fact.agent_id, fact.customer, fact.written_by_run_id, fact.written_in_run) == (run.agent_id, "acme", run.pk, run.pk)
    # No call row for this key (no loop drove the run): the rest of the provenance stays empty.
    assert fact.written_by_call is None and fact.approved_by_name == ""


def test_search_returns_the_scopes_facts_best_first_and_records_each_read(settings, run_for, save):
    settings.MEMORY_SEARCH_LIMIT = 2
    save("Acme ships by rail", customer="acme")
    save("Acme invoices by e-mail", customer="acme")
    save("Acme likes rail, rail and more rail", customer="acme")
    save("Globex ships by rail", customer="globex")
    reader = run_for("acme")
    result = search_memory({"query": "acme rail"}, context(reader, "read-key"))
    texts = [fact["text"] for fact in result["facts"]]
    assert len(texts) == 2 and all("rail" in text for text in texts)
    assert set(result["facts"][0]) == {"memory_id", "text", "saved_at"}
    reads = MemoryRead.objects.filter(run=reader)
    assert sorted(reads.values_list("memory__text", flat=True)) == sorted(texts)
    assert set(reads.values_list("call_key", flat=True)) == {"read-key"}


def test_an_experiments_search_finds_facts_and_records_no_read(run_for, save):
    save("Acme ships by rail", customer="acme")
    reader = run_for("acme")
    type(reader).objects.filter(pk=reader.pk).update(experiment=True)
    found = search_memory({"query": "rail"}, context(reader, "read-key"))["facts"]
    assert [fact["text"] for fact in found] == ["Acme ships by rail"]
    assert not MemoryRead.objects.exists()


def test_a_search_that_finds_nothing_records_no_read(run_for, save):
    save("Acme ships by rail", customer="acme")
    assert memory_recall(run_id=run_for("").pk, customer="", query="rail") == []
    assert search_memory({"query": "rail"}, context(run_for("globex")))["facts"] == []
    assert not MemoryRead.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_saves_at_the_same_moment_never_pass_the_bound(settings, run_for):
    """Each save counts its scope under a lock of the agent's row (SQLite: one writer at a time),
    so of several runs saving the last free place at once exactly one gets it."""
    from tests.support.threads import together

    settings.MEMORY_MAX_FACTS = 3
    runs = [run_for("acme") for _ in range(6)]
    memory_save(run_id=runs[0].pk, customer="acme", text="already here", idempotency_key="k0")
    memory_save(run_id=runs[0].pk, customer="acme", text="also here", idempotency_key="k1")
    results = together(*[
        (lambda run=run, n=n: memory_save(run_id=run.pk, customer="acme", text=f"fact {n}", idempotency_key=f"r{n}"))
        for n, run in enumerate(runs)
    ])
    assert sum(1 for r in results if not isinstance(r, Exception) and r.created) == 1
    assert all(isinstance(r, MemoryRefused) for r in results if isinstance(r, Exception)), results
    assert Memory.objects.filter(customer="acme").count() == 3


def test_pruning_the_runs_keeps_the_fact_and_where_it_came_from_and_drops_their_reads(run_for, save):
    from memory.models import Memory, MemoryRead
    from memory.services import memory_recall
    from runs.lifecycle.archive import runs_delete

    writer, reader = run_for("acme"), run_for("acme")
    fact = save("The acme account renews in March.", customer="acme", run=writer)
    memory_recall(run_id=reader.pk, customer="acme", query="renews", call_key="k")
    assert MemoryRead.objects.filter(memory=fact, run=reader).exists()
    assert runs_delete(run_ids=[writer.pk, reader.pk]) == 2
    fact = Memory.objects.get(pk=fact.pk)
    assert fact.written_by_run is None and fact.written_in_run == writer.pk
    assert not MemoryRead.objects.filter(memory=fact).exists()
