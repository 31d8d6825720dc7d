"""Reads for the run history: filtered runs, newest first, a page at a time.

Built to stay fast at a million runs and ten million steps: the model and tool filters read the
names each run holds (Run.models_used, Run.tools_used: the database keeps them from the run's
steps and calls), every other filter has an index that also gives the order, and the total is
counted only up to a cap.
A page is found as ids first (the filters' indexes, no run's columns read for the runs it skips),
then its rows by id; the capped total is often known from those ids, without counting again.
"""

import hashlib
from dataclasses import dataclass
from datetime import date, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import StrIndex, Substr
from django.db.models.lookups import GreaterThan

from runs.days import day_start
from runs.lifecycle.run_marks import decisions_filter, with_decision_counts
from runs.lifecycle.run_search import text_filter
from runs.models import Agent, Run
from toolsapp.models import Tool

PAGE_SIZE = 50
TASK_PREVIEW_CHARS = 120
# Counting every match of a model or text filter visits each run; beyond this many the page
# says "more than" instead of counting on.
COUNT_CAP = 10_000
# A total of at least COUNT_KEEP_FROM matches is kept COUNT_KEEP_SECONDS (in the cache, by query):
# paging through a filter's results counted them again on every page, up to 90 ms of a 120 ms
# page at a million runs on PostgreSQL. Such a total may be that old; smaller ones, cheap to
# count, are always counted afresh (a person who just launched a run sees it counted at once).
COUNT_KEEP_FROM = 1_000
COUNT_KEEP_SECONDS = 30

LIST_FIELDS = (
    "id",
    "created_at",
    "agent__id",
    "agent__name",
    "status",
    "summary_pending",  # an ended run whose summary is being written reads as stopping
    "stop_reason",
    "iterations",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "active_seconds",  # the duration column
    "rerun_of_id",  # the parent column
    "forked_from_id",
)


def run_history(
    *,
    status: str = "",
    stop_reason: str = "",
    agent: Agent | None = None,
    model: str = "",
    tool: str = "",
    created_from: date | None = None,
    created_to: date | None = None,
    text: str = "",
    known: dict[str, list[str]] | None = None,
    experiments: str = "hide",
    projects: set[int] | None = None,
    decisions: str = "",
) -> QuerySet[Run]:
    """Runs matching every given filter, newest first; `created_to` includes its whole day.
    `known`: history_filter_suggestions(), when the caller has read them already.
    `experiments`: "hide" experiments' runs (the default view), "include" them, or "only" them.
    `projects`: only these projects' runs (None: every project's).
    `decisions`: only runs with a call rejected or edited (a key of run_marks.DECISION_FILTERS)."""
    runs = Run.objects.all()
    if projects is not None:
        runs = runs.filter(agent_id__in=Agent.objects.filter(project_id__in=projects).values("pk"))
    if experiments == "only":
        runs = runs.filter(experiment=True)
    elif experiments != "include" and Run.objects.filter(experiment=True).exists():
        # Only filtered when there is one to hide: the filters' indexes then serve as before.
        runs = runs.filter(experiment=False)
    if (model or tool) and known is None:
        known = history_filter_suggestions(projects)
    if status:
        runs = runs.filter(status=status)
    if stop_reason:
        runs = runs.filter(stop_reason=stop_reason)
    if agent is not None:
        runs = runs.filter(agent=agent)
    if model:
        runs = runs.filter(_uses_any("models_used", names_like(model, known["models"])))
    if tool:
        runs = runs.filter(_uses_any("tools_used", names_like(tool, known["tools"])))
    if created_from is not None:
        runs = runs.filter(created_at__gte=day_start(created_from))
    if created_to is not None:
        runs = runs.filter(created_at__lt=day_start(created_to + timedelta(days=1)))
    if text:
        runs = runs.filter(text_filter(text, using=runs.db))
    if decisions:
        runs = runs.filter(decisions_filter(decisions))
    return runs.order_by("-created_at", "-pk")


def _uses_any(column: str, names: list[str]) -> Q:
    """Runs whose `column` (Run.models_used or Run.tools_used, kept by the database from their
    steps and calls) holds one of `names`, matched exactly: STRPOS or INSTR, case-sensitive on
    every database (SQLite's LIKE is not)."""
    found = Q()
    for name in names:
        found |= Q(GreaterThan(StrIndex(column, Value(f"\n{name}\n")), 0))
    return found


def runs_for_listing(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Only the columns a list shows: no config, answer or full task (they can be large); with the
    calls people rejected or edited counted in the same query (no query per row)."""
    return with_decision_counts(
        # Who launched it as a name only: a User per row would cost more than the page's queries.
        runs.select_related("agent").only(*LIST_FIELDS).annotate(launcher_name=F("created_by__username")).annotate(task_preview=Substr("task", 1, TASK_PREVIEW_CHARS + 1))
    )


@dataclass(frozen=True)
class HistoryPage:
    runs: list[Run]
    number: int
    has_previous: bool
    has_next: bool
    total: int  # matching runs, counted up to COUNT_CAP + 1
    page_size: int = PAGE_SIZE

    @property
    def total_is_exact(self) -> bool:
        return self.total <= COUNT_CAP

    @property
    def num_pages(self) -> int | None:
        if not self.total_is_exact:
            return None
        return max(1, -(-self.total // self.page_size))

    @property
    def first_index(self) -> int:
        return (self.number - 1) * self.page_size + 1 if self.runs else 0

    @property
    def last_index(self) -> int:
        return (self.number - 1) * self.page_size + len(self.runs)


def run_history_page(runs: QuerySet[Run], *, number: int, page_size: int = PAGE_SIZE) -> HistoryPage:
    """One page of `runs`; one row more than a page is read to know whether another follows.

    The page's ids come first (the filters' indexes: no run's columns are read for the runs a late
    page skips), then its rows by id; see _page_ids for the total."""
    number = max(1, number)
    page_ids, total = _page_ids(runs, offset=(number - 1) * page_size, size=page_size + 1)
    listed = runs_for_listing(Run.objects.filter(pk__in=page_ids)).order_by(*runs.query.order_by)
    rows = list(listed) if page_ids else []
    return HistoryPage(
        runs=rows[:page_size],
        number=number,
        has_previous=number > 1,
        has_next=len(rows) > page_size,
        total=total,
        page_size=page_size,
    )


def _page_ids(runs: QuerySet[Run], *, offset: int, size: int) -> tuple[list[int], int]:
    """(the ids of runs[offset : offset + size], the total counted up to COUNT_CAP + 1).

    On SQLite, counting walks the same rows as listing them in order, so a page within the cap
    reads the ids up to the cap once and takes both from them. PostgreSQL counts far cheaper
    without an order (it may merge or hash the filters' indexes), so it counts apart, unless the
    ids say the total: a later page that is the last one ends the matches, a late page with rows
    proves more than the cap. A first page always counts (as many queries whatever it finds)."""
    ids = runs.values_list("pk", flat=True)
    if offset + size <= COUNT_CAP + 1 and connections[runs.db].vendor == "sqlite":
        first = list(ids[: COUNT_CAP + 1])
        return first[offset : offset + size], len(first)
    page_ids = list(ids[offset : offset + size])
    if offset and 0 < len(page_ids) < size:
        return page_ids, min(offset + len(page_ids), COUNT_CAP + 1)
    if page_ids and offset + len(page_ids) >= COUNT_CAP + 1:
        return page_ids, COUNT_CAP + 1
    return page_ids, _capped_count(runs)


def _capped_count(runs: QuerySet[Run]) -> int:
    """The matches counted up to COUNT_CAP + 1, or a large total counted in the last
    COUNT_KEEP_SECONDS by the same query (its SQL holds every filter, the person's projects too)."""
    counted = runs.order_by()[: COUNT_CAP + 1]
    sql, params = counted.values("pk").query.sql_with_params()
    key = "history-count:" + hashlib.blake2b(f"{runs.db}\0{sql}\0{params!r}".encode(), digest_size=16).hexdigest()
    try:
        kept = cache.get(key)
    except Exception:  # noqa: BLE001 - no cache (Redis down): count, as without one
        kept = None
    if kept is not None:
        return kept
    total = counted.count()
    if total >= COUNT_KEEP_FROM:
        try:
            cache.set(key, total, COUNT_KEEP_SECONDS)
        except Exception:  # noqa: BLE001 - counted again next time
            pass
    return total


def agent_recent_runs(*, agent: Agent, limit: int = 20) -> list[Run]:
    return list(runs_for_listing(run_history(agent=agent))[:limit])


def names_like(text: str, known: list[str]) -> list[str]:
    """What a model or tool filter matches: the name as typed, and every known name that contains
    it, whatever the case ("cancel" finds cancel_order). Matched by these exact names, so the
    filters keep their indexes at any number of runs."""
    needle = text.strip().lower()
    return [text.strip(), *(name for name in known if needle in name.lower() and name != text.strip())]


def history_filter_suggestions(projects: set[int] | None = None) -> dict[str, list[str]]:
    """Model and tool names offered while typing a filter (free text is allowed too); with
    `projects`, those of these projects' agents and tools (and the site's shared tools) only."""
    models = set(settings.LLM_MODELS)
    agents, tools = Agent.objects.all(), Tool.objects.all()
    if projects is not None:
        agents = agents.filter(project_id__in=projects)
        tools = tools.filter(Q(project__isnull=True) | Q(project_id__in=projects))
    for model_list in agents.values_list("model_list", flat=True):
        models.update(m for m in model_list or () if isinstance(m, str))
    return {"models": sorted(models), "tools": list(tools.order_by("name").values_list("name", flat=True))}
