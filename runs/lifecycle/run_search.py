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
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.db.models.functions import Substr

from runs.models import Run, RunSearchText, ToolCall

ANSWER_CHARS = 4000
RESULT_CHARS = 400
RESULTS = 40
MIN_CHARS = 3
FTS_TABLE = "runs_runsearchtext_fts"  # SQLite only (migration 0026)


def run_search_store(*, run_id: int, answer: str) -> None:
    """Write (or rewrite) the run's search text; call inside the transaction that ends it."""
    results = (
        ToolCall.objects.filter(run_id=run_id).exclude(result_text="").order_by("pk")
        .values_list(Substr("result_text", 1, RESULT_CHARS), flat=True)[:RESULTS]
    )
    text = search_form("\n".join([(answer or "")[:ANSWER_CHARS], *results]))
    RunSearchText.objects.update_or_create(run_id=run_id, defaults={"text": text})


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
    # A union, not an OR: each side is then served by its own trigram index (an OR of the two
    # makes PostgreSQL read every run).
    tasks = Run.objects.using(using).filter(task__icontains=text).values("pk")
    said = RunSearchText.objects.using(using).filter(text__contains=needle).values("run_id")
    return Q(pk__in=tasks.union(said, all=True))  # IN drops the duplicates; no set to build first
