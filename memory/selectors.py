"""What the memories page reads: an agent's facts (all, or those a search finds), a page at a time,
each with the last runs that read it."""
from dataclasses import dataclass, field

from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Max, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from memory.models import Memory, MemoryRead
from memory.search import memory_search
from toolsapp.builtin import MEMORY_TOOLS

PAGE_SIZE = 20
READERS_SHOWN = 10
CUSTOMERS_LISTED = 200


@dataclass
class FactRow:
    memory: Memory
    readers: list[int] = field(default_factory=list)  # the last runs that read it, newest first
    reader_count: int = 0  # every run that read it


def agent_customers(*, agent) -> list[str]:
    """The customers the agent holds facts for, in order, at most CUSTOMERS_LISTED."""
    return list(Memory.objects.filter(agent=agent).order_by("customer").values_list("customer", flat=True)
                .distinct()[:CUSTOMERS_LISTED])


def memory_tools(*, agent) -> dict[str, bool]:
    """Whether the agent has each memory tool, enabled: memory is on when it has both."""
    have = set(agent.tools.filter(name__in=MEMORY_TOOLS, enabled=True).values_list("name", flat=True))
    return {name: name in have for name in MEMORY_TOOLS}


def agent_memories(*, agent, query: str = "", customer: str | None = None, run: int | None = None) -> QuerySet:
    """The agent's facts, newest first, or with a query those it matches, best first (the same
    search the search_memory tool does). `customer`: one scope only ("" the runs without one);
    `run`: only the facts that run saved or read."""
    memories = Memory.objects.filter(agent=agent).select_related("written_by_call", "edited_by")
    if customer is not None:
        memories = memories.filter(customer=customer)
    if run is not None:
        memories = memories.filter(Q(written_in_run=run) | Q(pk__in=MemoryRead.objects.filter(run_id=run).values("memory_id")))
    if query.strip():
        return memory_search(memories=memories, query=query)
    return memories.order_by("-created_at", "-pk")


def memory_page(*, memories: QuerySet, number) -> tuple[Page, list[FactRow]]:
    """One page of `memories`, each fact with its readers."""
    page = Paginator(memories, PAGE_SIZE).get_page(number)
    rows = [FactRow(memory) for memory in page.object_list]
    by_id = {row.memory.pk: row for row in rows}
    for read in _last_readers(list(by_id)):
        row = by_id[read["memory_id"]]
        row.readers.append(read["run_id"])
        row.reader_count = read["runs"]
    return page, rows


def _last_readers(memory_ids: list[int]):
    """Per fact, the READERS_SHOWN runs that read it last, newest first, each row with the count
    of every run that read it: one query, however many runs read a fact."""
    if not memory_ids:
        return []
    per_run = (
        MemoryRead.objects.filter(memory_id__in=memory_ids).values("memory_id", "run_id").annotate(last=Max("read_at"))
        .annotate(
            position=Window(RowNumber(), partition_by=[F("memory_id")], order_by=[F("last").desc(), F("run_id").desc()]),
            runs=Window(Count("*"), partition_by=[F("memory_id")]),
        )
    )
    return per_run.filter(position__lte=READERS_SHOWN).order_by("memory_id", "position")
