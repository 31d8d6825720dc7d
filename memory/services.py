"""Writes to an agent's memory: a run saving a fact, a run reading facts, a person editing or
deleting one."""
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from memory import limits
from memory.models import Memory, MemoryRead
from memory.search import memory_search
from runs.models import Agent, Run, ToolCall


class MemoryRefused(Exception):
    """A save the memory cannot take; the message says why, in words for the model."""


@dataclass(frozen=True)
class Saved:
    memory: Memory
    created: bool


def clean_text(text: str) -> str:
    """The fact as stored: trimmed, between TEXT_MIN and TEXT_MAX characters (MemoryRefused)."""
    text = (text or "").strip()
    if not limits.TEXT_MIN <= len(text) <= limits.TEXT_MAX:
        raise MemoryRefused(f"a fact must be {limits.TEXT_MIN} to {limits.TEXT_MAX} characters long")
    return text


def memory_save(*, run_id: int, customer: str, text: str, idempotency_key: str) -> Saved:
    """Save `text` for the run's agent and `customer`, with where it came from.

    Idempotent: the same call again (a retry, same key) gets its fact back, and a fact already
    saved word for word in the scope is returned rather than saved twice (created=False).
    Refused when the scope already holds limits.max_facts() facts: nothing is ever evicted to
    make room, since a person approved each fact that is there.
    """
    text = clean_text(text)
    agent_id = Run.objects.values_list("agent_id", flat=True).get(pk=run_id)
    scope = Memory.objects.filter(agent_id=agent_id, customer=customer)
    with transaction.atomic():
        # One save of this agent at a time (the lock is held to the commit), so two runs saving
        # at once cannot both pass the bound; SQLite's writes are one at a time already.
        Agent.objects.select_for_update().filter(pk=agent_id).values_list("pk", flat=True).get()
        existing = (
            Memory.objects.filter(idempotency_key=idempotency_key).first() if idempotency_key else None
        ) or scope.filter(text=text).first()
        if existing is not None:
            return Saved(existing, created=False)
        limit = limits.max_facts()
        if scope.count() >= limit:
            raise MemoryRefused(
                f"the memory is full: it holds {limit} facts for this customer, its limit. Nothing was saved. "
                "Carry on without saving; a person can delete old facts on the agent's memories page."
            )
        call = ToolCall.objects.select_related("step", "approval").filter(
            run_id=run_id, idempotency_key=idempotency_key
        ).first() if idempotency_key else None
        try:
            with transaction.atomic():
                memory = Memory.objects.create(
                    agent_id=agent_id, customer=customer, text=text, idempotency_key=idempotency_key,
                    written_by_run_id=run_id, written_in_run=run_id, written_by_call=call,
                    written_at_step=call.step.index if call else None,
                    approved_by_name=call.approval.decider if call and call.approval else "",
                )
        except IntegrityError:  # another delivery of the same call got there first
            return Saved(Memory.objects.get(idempotency_key=idempotency_key), created=False)
    return Saved(memory, created=True)


def memory_recall(*, run_id: int, customer: str, query: str, call_key: str = "") -> list[Memory]:
    """The facts of the run's agent and `customer` that match `query` (best first, at most
    limits.search_limit()), each read recorded against the run (not an experiment's: its reads
    would list it among a fact's readers, and an experiment leaves no trace outside itself)."""
    agent_id, experiment = Run.objects.values_list("agent_id", "experiment").get(pk=run_id)
    found = list(memory_search(memories=Memory.objects.filter(agent_id=agent_id, customer=customer), query=query)
                 [: limits.search_limit()])
    if found and not experiment:
        call_id = ToolCall.objects.filter(run_id=run_id, idempotency_key=call_key).values_list("pk", flat=True).first() \
            if call_key else None
        MemoryRead.objects.bulk_create(
            [MemoryRead(memory=memory, run_id=run_id, call_key=call_key, call_id=call_id) for memory in found]
        )
    return found


def memory_update(*, memory: Memory, text: str, user) -> Memory:
    """A person's correction of a fact's text (ValidationError when it is not a valid fact)."""
    try:
        memory.text = clean_text(text)
    except MemoryRefused as refused:
        raise ValidationError(str(refused)) from None
    memory.edited_by = user
    memory.save(update_fields=["text", "edited_by", "updated_at"])
    return memory


def memory_delete(*, memory: Memory) -> None:
    """Forget a fact, with the record of the runs that read it."""
    memory.delete()
