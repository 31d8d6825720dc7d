"""The run history's search over what a run said and read, beside its task.

When a run ends, its answer and the start of each tool result are written to one RunSearchText
row (inside the transaction that ends it: a hook in runs/apps.py), which an index serves: a
trigram FTS5 table on SQLite, a pg_trgm GIN index on PostgreSQL. A search of a few characters
reads that index, never every tool result of every run, so it stays fast at 100,000 runs.

What is searched: the task of every run (the runs table's own column), and for ended runs the
answer and up to RESULTS results, each cut to RESULT_CHARS. A run still going is found by its
task only; its results join the search when it ends. A search shorter than MIN_CHARS (no
trigram to look up) searches tasks only.
"""
from django.db import connections
from django.db.models import Exists, OuterRef, Q
from django.db.models.expressions import RawSQL
from django.db.models.functions import Substr

from runs.models import Run, RunSearchText, ToolCall

ANSWER_CHARS = 4000
RESULT_CHARS = 400
RESULTS = 40
MIN_CHARS = 3
FEW_TEXTS = 2000  # PostgreSQL: up to this many matching texts are passed on as their run ids
FTS_TABLE = "runs_runsearchtext_fts"  # SQLite only (migration 0026)


def run_search_store(*, run_id: int, answer: str) -> None:
    """Write (or rewrite) the run's search text; call inside the transaction that ends it."""
    results = (
        ToolCall.objects.filter(run_id=run_id).exclude(result_text="").order_by("pk")
        .values_list(Substr("result_text", 1, RESULT_CHARS), flat=True)[:RESULTS]
    )
    text = search_form("\n".join([(answer or "")[:ANSWER_CHARS], *results]))
    # One INSERT ... ON CONFLICT DO UPDATE (a summary rewrites it): no read, no savepoints, inside
    # the transaction that ends the run.
    RunSearchText.objects.bulk_create([RunSearchText(run_id=run_id, text=text)], update_conflicts=True,
                                      unique_fields=["run"], update_fields=["text"])


def search_form(text: str) -> str:
    """How search texts are stored and searched for: upper case, so PostgreSQL compares with a
    plain LIKE, and does not upper-case every matching text again (7x the time for a common word)."""
    return text.upper()


def index_ended_run(*, run: Run, fields: dict) -> None:
    """The engine's run_ended hook: the run's answer as it ends, and what its tools returned."""
    if fields.get("status", run.status) in Run.FINISHED_STATUSES:
        run_search_store(run_id=run.pk, answer=fields.get("answer", run.answer))


def index_summary(*, run: Run, step, tokens: int, cost_usd: float) -> None:
    """The engine's summary_added hook: a stopped run's summary is its answer now."""
    message = step.message if isinstance(step.message, dict) else {}
    run_search_store(run_id=run.pk, answer=message.get("content") or "")


def text_filter(text: str, *, using: str = "default") -> Q:
    """Runs whose task contains `text`, or (ended runs, `text` of MIN_CHARS or more) whose answer
    or a tool result does; whatever the case."""
    matches = Q(task__icontains=text)
    if len(text) < MIN_CHARS:
        return matches
    needle = search_form(text)
    if connections[using].vendor == "sqlite":
        phrase = '"' + needle.replace('"', '""') + '"'  # one FTS5 phrase: the text as typed, as a substring
        said = RawSQL(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", [phrase])  # noqa: S611 - a constant name; the text is a parameter
        return matches | Q(pk__in=said)
    # PostgreSQL: how many texts match decides the plan. A few: their run ids, read at once from the
    # trigram index, go in as a list, so the task's trigram index and the primary key serve the
    # rest (an OR with a subquery would read every run). Many: the set is built once and the runs
    # are walked newest first, which stops at the page (a join with the set would sort it all).
    said = RunSearchText.objects.using(using).filter(text__contains=needle)
    ids = list(said.values_list("run_id", flat=True)[: FEW_TEXTS + 1])
    if len(ids) <= FEW_TEXTS:
        return matches | Q(pk__in=ids) if ids else matches
    return matches | Q(Exists(said.filter(run_id=OuterRef("pk"))))
