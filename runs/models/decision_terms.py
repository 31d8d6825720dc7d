"""What the figures of people's decisions mean, in Python and in SQL: when a card appeared, how
long its person took from then, which approvals were quick, and which were later contradicted.
One definition for the Supervision page and the nudge (runs/supervision) and for /metrics and
the traces (runs/observability), which never import each other; like deciders.py.

- **The card appeared** when a person who may decide it was first shown it on the queue or the
  approval's page (CallEvidence.shown_at), never before it was asked: max(requested_at,
  shown_at). A call decided before anyone opened its card there (in chat, through the API), or
  one without evidence (asked before evidence was kept), appeared when it was asked.
- **Time to decide**: from the card appearing to the decision, never below 0 (a decision stamped
  by a host whose clock is behind). The metrics page's "wait" is from asking instead.
- **A quick approval**: a person's approval (not a rule's, a grant's or the run's policy's) made
  within its project's `quick_approval_seconds` of the card appearing.
- **A contradicted approval**: an approved call that
  * failed: the tool answered with an error (ToolCall FAILED; an unknown outcome is not counted);
  * was moot: its state check said so (CallEvidence.state has `"moot": true`), or the tool's own
    answer said it had already been done (`"already_…": true` anywhere in it, as the demo shop's
    cancel_order answers `"already_cancelled": true`);
  * or was reversed: a later call of the same tool on the same thing (the same
    CallEvidence.identity: the tool's identifier fields) with other arguments succeeded, so it
    changed again what this one had changed. The same arguments again are a repeat, not a reversal.
"""
import re
from datetime import datetime

from django.db.models import (
    Case,
    CharField,
    Count,
    F,
    FloatField,
    Func,
    IntegerField,
    Q,
    RowRange,
    Sum,
    Value,
    When,
    Window,
)
from django.db.models.functions import Coalesce, Greatest
from django.db.models.lookups import LessThan

from runs.models.core import Approval, ToolCall
from runs.models.evidence import CallEvidence

APPROVED, REJECTED = Approval.Status.APPROVED, Approval.Status.REJECTED
# A person's decision: approved or rejected by someone, not automatically (expiry is nobody's).
BY_A_PERSON = Q(status__in=(APPROVED, REJECTED), automatic=False)
QUICK_LIMIT = "run__agent__project__quick_approval_seconds"
# "Within 5 s" holds 5 s exactly, measured to the millisecond (SQLite's day fractions are off by
# microseconds: 5 s can read 5.00000002).
MILLISECOND = 0.001
# The tool's own answer that the call changed nothing: checked as text, on the few rows that hold it.
ALREADY_DONE_TEXT = '"already_'
ALREADY_DONE_PATTERN = r'"already_[A-Za-z0-9_]*"\s*:\s*true'


# --- In Python ------------------------------------------------------------------------------------


def card_appeared_at(requested_at: datetime, shown_at: datetime | None) -> datetime:
    return requested_at if shown_at is None else max(requested_at, shown_at)


def seconds_to_decide(requested_at: datetime, shown_at: datetime | None, decided_at: datetime) -> float:
    return max(0.0, (decided_at - card_appeared_at(requested_at, shown_at)).total_seconds())


def quick_approval(status: str, automatic: bool, seconds: float, limit: int) -> bool:
    return status == APPROVED and not automatic and seconds <= limit + MILLISECOND


def why_contradicted(call_status: str, state: dict | None, result_text: str) -> str:
    """Of an approval known to be contradicted: "failed", "moot", else "reversed" (the first that
    holds, as contradicted_why says in SQL)."""
    if call_status == ToolCall.Status.FAILED:
        return "failed"
    said_done = ALREADY_DONE_TEXT in result_text and re.search(ALREADY_DONE_PATTERN, result_text)
    return "moot" if (state or {}).get("moot") is True or said_done else "reversed"


# --- In SQL, over Approval rows ---------------------------------------------------------------------


class SecondsBetween(Func):
    """end - start in seconds, as a float, in SQL (Django computes datetime differences on SQLite
    with a Python function per row): the metrics' aggregates and the supervision figures."""

    arity = 2
    output_field = FloatField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s)) * 86400.0)",
                           arg_joiner=") - julianday(", **extra_context)

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="EXTRACT(EPOCH FROM (%(expressions)s))::float8",
                           arg_joiner=" - ", **extra_context)

    def as_sql(self, compiler, connection, **extra_context):
        if connection.vendor not in ("sqlite", "postgresql"):
            raise NotImplementedError(f"SecondsBetween is not written for {connection.vendor}")
        return super().as_sql(compiler, connection, **extra_context)


def card_appeared() -> Greatest:
    return Greatest(F("requested_at"), Coalesce(F("evidence__shown_at"), F("requested_at")))


def decide_seconds() -> Case:
    """Seconds from the card appearing to the decision; None while undecided."""
    appeared = card_appeared()
    return Case(
        When(decided_at__isnull=True, then=Value(None)),
        When(LessThan(F("decided_at"), appeared), then=Value(0.0)),
        default=SecondsBetween(F("decided_at"), appeared),
        output_field=FloatField(),
    )


def quick_approvals(seconds: str) -> Q:
    """People's approvals whose annotated `seconds` (decide_seconds) are within their project's limit."""
    return Q(status=APPROVED, automatic=False, **{f"{seconds}__lte": F(QUICK_LIMIT) + Value(MILLISECOND)})


def failed() -> Q:
    return Q(status=APPROVED, tool_call__status=ToolCall.Status.FAILED)


def moot() -> Q:
    said_done = Q(tool_call__result_text__contains=ALREADY_DONE_TEXT,
                  tool_call__result_text__regex=ALREADY_DONE_PATTERN)
    return Q(status=APPROVED) & (Q(evidence__state__moot=True) | said_done)


def reversed_later(project_id: int | None = None) -> Q:
    """Approvals a later call reversed, found once for the whole query (an uncorrelated IN, which
    the database hashes): among the calls on a thing more than one call was on (most are not),
    each call's later succeeded calls on the same thing, counted by two window sums, outnumber
    those with its own arguments. With `project_id`, among that project's calls only (twins are
    a project's: another project's calls never reverse these)."""
    calls = CallEvidence.objects.all() if project_id is None else CallEvidence.objects.filter(project_id=project_id)
    repeated = (calls.exclude(identity="").order_by().values("identity")
                .annotate(calls=Count("pk")).filter(calls__gt=1).values("identity"))
    succeeded = Case(When(approval__tool_call__status=ToolCall.Status.SUCCEEDED, then=Value(1)), default=Value(0),
                     output_field=IntegerField())
    after, order = RowRange(start=1, end=None), [F("created_at").asc(), F("pk").asc()]
    thing = [F("project_id"), F("identity")]
    reversed_calls = calls.filter(identity__in=repeated).annotate(
        later=Window(Sum(succeeded), partition_by=thing, order_by=order, frame=after),
        later_same=Window(Sum(succeeded), partition_by=[*thing, F("approval__tool_call__args_hash")], order_by=order,
                          frame=after),
    ).filter(later__gt=Coalesce(F("later_same"), Value(0)))
    return Q(status=APPROVED, pk__in=reversed_calls.values("pk"))


def contradicted(project_id: int | None = None) -> Q:
    return failed() | moot() | reversed_later(project_id)


def contradicted_why(project_id: int | None = None) -> Case:
    """"failed", "moot" or "reversed": the first that holds of a contradicted approval, else ""
    (`project_id`: of approvals of that project only, which reads fewer calls)."""
    return Case(When(failed(), then=Value("failed")), When(moot(), then=Value("moot")),
                When(reversed_later(project_id), then=Value("reversed")), default=Value(""), output_field=CharField())
