"""What a run's status alone does not tell: the calls people (or their rules) refused or changed, and
the words of an ending an operator chose.

A run that ends "Succeeded" after its destructive call was rejected did not do what it was asked,
so the history, the run page and the API mark it ("1 call rejected", "2 calls edited") beside its
status, which stays as stored. Counted from the run's approvals, with one definition of each kind
used by the history's columns, its filter and the run page alike."""
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from runs.models import Approval, Run

# A call a person or a rule refused: it never ran.
REJECTED = Q(status=Approval.Status.REJECTED)
# A call approved with other arguments than the model's: it ran as a person rewrote it.
EDITED = Q(status=Approval.Status.APPROVED) & ~Q(edited_args_hash="")

# The history's filter and the API's `decisions` parameter: its values and what each finds.
DECISION_FILTERS = {
    "rejected": REJECTED,
    "edited": EDITED,
    "rejected_or_edited": REJECTED | EDITED,
}
DECISION_CHOICES = [
    ("rejected", "a call rejected"),
    ("edited", "a call edited"),
    ("rejected_or_edited", "a call rejected or edited"),
]

OPERATOR_STOP_LABEL = Run.StopReason.OPERATOR_STOP.label  # "Stopped by an operator"


def decisions_filter(kind: str) -> Q:
    """Runs with at least one approval of `kind` (a key of DECISION_FILTERS). The approvals are
    found first (their status index), then their runs by id: the runs' own indexes keep the order."""
    return Q(pk__in=Approval.objects.filter(DECISION_FILTERS[kind]).values("run_id"))


def _counted(kind: Q) -> Coalesce:
    """How many of the listed run's approvals are of `kind`: one subquery on the approvals' run index."""
    per_run = Approval.objects.filter(kind, run_id=OuterRef("pk")).order_by().values("run_id").annotate(n=Count("pk"))
    return Coalesce(Subquery(per_run.values("n"), output_field=IntegerField()), 0)


def with_decision_counts(runs):
    """`runs` with calls_rejected and calls_edited on each row (in the rows' own query)."""
    return runs.annotate(calls_rejected=_counted(REJECTED), calls_edited=_counted(EDITED))


def run_decision_counts(*, run_id: int) -> tuple[int, int]:
    """(calls rejected, calls edited) of one run, in one query."""
    counts = Approval.objects.filter(run_id=run_id).aggregate(
        rejected=Count("pk", filter=REJECTED), edited=Count("pk", filter=EDITED))
    return counts["rejected"], counts["edited"]


def decision_marks(*, rejected: int, edited: int) -> list[str]:
    """The marks a run carries beside its status: ["1 call rejected", "2 calls edited"], or []."""
    marks = []
    if rejected:
        marks.append(f"{rejected} call{'s' if rejected != 1 else ''} rejected")
    if edited:
        marks.append(f"{edited} call{'s' if edited != 1 else ''} edited")
    return marks


def status_label(run: Run) -> str:
    """The status as people read it: the stored status's label, except that a run an operator
    stopped with a summary (stored as cancelled, which it is for every count) says so."""
    if not run.summary_pending and run.status == Run.Status.CANCELLED and run.stop_reason == Run.StopReason.OPERATOR_STOP:
        return OPERATOR_STOP_LABEL
    return run.get_shown_status_display()
