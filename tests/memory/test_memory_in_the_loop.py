"""Memory through the real loop and the demo model: a save waits for a person, whose decision
the fact keeps; a later run for the same customer finds it, a run for another customer does not."""
import json

import pytest
from django.urls import reverse

from memory.models import Memory, MemoryRead
from runs.engine.loop import run_advance
from runs.models import Approval, Run, ToolCall
from runs.supervision.approvals.decide import approval_decide
from tests.engine.loop_contract.support import result_for
from tests.support.timeline_replay import mismatches

FACT = "Acme wants every invoice sent to billing@acme.test, not to the buyer"


@pytest.fixture(autouse=True)
def _timeline_equals_rows(transactional_db):
    """Every run a test produced: its timeline, replayed alone, equals its rows."""
    yield
    problems = [problem for run_id in Run.objects.values_list("pk", flat=True) for problem in mismatches(run_id)]
    assert problems == [], "the timeline and the database disagree:\n" + "\n".join(problems[:20])


def saving(script, text=FACT):
    return script({"tool_calls": [{"id": "save1", "name": "save_memory", "arguments": {"text": text}}]},
                  {"content": "Noted for next time."})


def searching(script, query="invoice billing"):
    return script({"tool_calls": [{"id": "find1", "name": "search_memory", "arguments": {"query": query}}]},
                  {"content": "Found what I knew."})


def test_a_saved_fact_is_approved_by_a_person_then_found_by_the_next_run_for_that_customer_only(
    launch, script, memo_agent, alice, no_dispatch, client
):
    # Run 1 (acme) asks to save a fact: the call waits for a person, its text in the queue.
    model = saving(script)
    first = launch("Remember where Acme's invoices go", agent="memo", models=[model], customer="acme")
    assert first.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=first, status=Approval.Status.PENDING)
    assert approval.tool_call.tool_name == "save_memory"
    assert not Memory.objects.exists()
    client.force_login(alice)
    for page in (reverse("approval_queue"), reverse("approval_detail", args=[approval.pk])):
        html = client.get(page).content.decode()
        assert "save_memory" in html and "billing@acme.test, not to the buyer" in html, page

    # A person approves; the run goes on, saves the fact and ends.
    approval_decide(approval_id=approval.pk, user=alice, approve=True)
    run_advance(run_id=first.pk)
    first.refresh_from_db()
    assert first.status == Run.Status.SUCCEEDED and first.answer == "Noted for next time."
    call = ToolCall.objects.get(run=first, tool_name="save_memory")
    assert call.status == ToolCall.Status.SUCCEEDED
    saved = result_for(script.requests(model)[1], "save1")
    fact = Memory.objects.get()
    assert saved == {"ok": True, "result": {"memory_id": fact.pk, "text": FACT, "saved_at": saved["result"]["saved_at"],
                                            "saved": True}}
    assert (fact.agent, fact.customer, fact.text) == (memo_agent, "acme", FACT)
    assert (fact.written_by_run, fact.written_by_call, fact.written_in_run) == (first, call, first.pk)
    assert fact.written_at_step == call.step.index
    assert call.approval_id == approval.pk
    assert Approval.objects.get(pk=approval.pk).decided_by == alice and fact.approved_by_name == "alice"

    # Run 2, the same customer: its search finds the fact, and the read is recorded.
    model = searching(script)
    second = launch("Where do Acme's invoices go?", agent="memo", models=[model], customer="acme")
    assert second.status == Run.Status.SUCCEEDED
    found = result_for(script.requests(model)[1], "find1")
    assert found["ok"] is True
    assert [(f["memory_id"], f["text"]) for f in found["result"]["facts"]] == [(fact.pk, FACT)]
    read = MemoryRead.objects.get(run=second)
    search_call = ToolCall.objects.get(run=second, tool_name="search_memory")
    assert read.memory == fact and read.call_key == search_call.idempotency_key

    # Run 3, another customer, the same words: nothing, and no read.
    model = searching(script)
    third = launch("Where do the invoices go?", agent="memo", models=[model], customer="globex")
    assert third.status == Run.Status.SUCCEEDED
    assert result_for(script.requests(model)[1], "find1") == {"ok": True, "result": {"facts": []}}
    assert not MemoryRead.objects.filter(run=third).exists()

    # The memories page links the fact to the run that wrote it, its decision and the run that read it.
    html = client.get(reverse("agent_memories", args=[memo_agent.pk])).content.decode()
    assert f'href="/runs/{first.pk}/#step-{fact.written_at_step}"' in html
    assert f'href="/approvals/{approval.pk}/"' in html
    assert f'href="/runs/{second.pk}/"' in html and f'href="/runs/{third.pk}/"' not in html

    # Each run that saved or read a fact links to them: its page to the facts page filtered by it.
    memories = reverse("agent_memories", args=[memo_agent.pk])
    for run, texts in ((first, [FACT]), (second, [FACT]), (third, [])):
        page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
        assert f'href="{memories}?run={run.pk}"' in page
        facts = client.get(memories, {"run": run.pk})
        assert [row.memory.text for row in facts.context["rows"]] == texts
        assert f"run #{run.pk}" in facts.content.decode()
    other = launch("hello", agent="memo", models=[script({"content": "hi"})], customer="acme")
    assert 'id="run-memories"' not in client.get(reverse("run_detail", args=[other.pk])).content.decode()


def test_a_rejected_save_stores_nothing_and_the_model_is_told(launch, script, memo_agent, alice, no_dispatch):
    model = saving(script, "Acme's admin password is hunter2")
    run = launch("Remember this", agent="memo", models=[model], customer="acme")
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)
    approval_decide(approval_id=approval.pk, user=alice, approve=False, reason="no secrets in memory")
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert result_for(script.requests(model)[1], "save1") == {"ok": False, "error": "rejected by operator: no secrets in memory"}
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.REJECTED
    assert not Memory.objects.exists()


def test_a_fact_edited_by_the_approver_is_saved_as_approved(launch, script, memo_agent, alice, no_dispatch):
    model = saving(script, "Acme prefers calls in the morning")
    run = launch("Remember this", agent="memo", models=[model], customer="acme")
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)
    approval_decide(approval_id=approval.pk, user=alice, approve=True,
                    arguments=json.dumps({"text": "Acme prefers calls before 10:00 CET"}))
    run_advance(run_id=run.pk)
    assert Memory.objects.get().text == "Acme prefers calls before 10:00 CET"


def test_the_run_policy_that_approves_saves_without_a_person_and_says_so(launch, script, memo_agent):
    run = launch("Remember this", agent="memo", models=[saving(script)], customer="acme", approval_policy="approve")
    assert run.status == Run.Status.SUCCEEDED
    assert Memory.objects.get().approved_by_name == "the run's policy"
