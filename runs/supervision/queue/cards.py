"""Reads for the approval queue: what an operator needs to decide a call, and the recent decisions.

The arguments' lines come from argument_lines.py and the identifiers the model may have invented
from evidence/provenance.py (plain data in, plain data out); the selectors here only gather that data in
a fixed number of queries, however many approvals wait.
"""
from dataclasses import dataclass, field
from datetime import datetime

from django.core.paginator import Page, Paginator
from django.db.models import Count, Min, Q
from django.utils import timezone

from hosting.text import JsonTooDeep
from hosting.text import loads as bounded_loads
from runs.models import Approval, ArchivedApproval, CallEvidence, Run, ToolCall
from runs.supervision.evidence.provenance import known_text, runs_shown, unseen_identifiers, unseen_in_lines
from runs.supervision.evidence.sources import assistant_text, evidence_shown, tools_quoted
from runs.supervision.evidence.twins import EVIDENCE_FIELDS, twin_row
from runs.supervision.queue.argument_lines import ArgumentLine, argument_lines
from runs.supervision.queue.facts import Supervision, approvals_supervision, tools_read

AUDIT_LIMIT = 50
ARCHIVE_PAGE = 100
PAGE_SIZE = 50  # pending approvals per page of the queue and of the API

# --- Identifiers the model may have made up ----------------------------------------------------


# --- Masked, pretty-printed arguments ------------------------------------------------------------


# --- Selectors ---------------------------------------------------------------------------------


@dataclass
class PendingApproval:
    approval: Approval
    run: Run
    call: ToolCall
    lines: list[ArgumentLine] = field(default_factory=list)
    # An edit a person proposed on a call that needs several approvals (masked like `lines`).
    proposed_lines: list[ArgumentLine] = field(default_factory=list)
    arguments_problem: str = ""  # set when the arguments are not JSON and cannot be shown
    raw_arguments: str = ""  # shown only when unparsable and the tool masks nothing
    unseen: list[str] = field(default_factory=list)
    model_said: str = ""
    expired: bool = False
    # What its tool says and who decides it (approvals_supervision, read once with the items).
    supervision: Supervision = field(default_factory=Supervision)
    # Supervision (filled by pending_supervision): who approved so far when two must, the group
    # asked, the rule that routed the call, and which controls the operator is offered.
    voters: list[str] = field(default_factory=list)
    group_name: str = ""
    quorum: tuple[str, ...] = ()  # groups that must each give one approval
    quorum_missing: tuple[str, ...] = ()
    routed_by: str = ""
    edit_json: str = ""  # the arguments to edit; "" when editing is not offered
    edit_refusal: str = ""  # why there is no edit control
    schema: dict = field(default_factory=dict)  # the tool's JSON schema, for the browser's check
    grant_refusal: str = ""  # why there are no "for this run" choices
    no_approver: str = ""  # why no one can give the approvals it still needs (queue/no_approver.py)
    # The decision moment (issue 47): the call's evidence as stored when it was asked about
    # (runs/models/evidence.py: {"said", "read", "values"}), its state check, its twins, and the
    # nudge this person gets before Approve.
    evidence: dict = field(default_factory=dict)
    outside_paths: list[str] = field(default_factory=list)
    state: dict = field(default_factory=dict)
    state_checked_at: datetime | None = None
    state_requested_at: datetime | None = None  # when its check was last asked for (evidence/state_checks.py)
    shown_at: datetime | None = None  # when a person who may decide it was first shown the card
    twins: list = field(default_factory=list)
    twin_row: dict | None = None  # its evidence's row as evidence/twins.py reads it (twins.twin_row)
    nudge: dict | None = None


# What a card needs of an approval, read with it (its evidence too: one query fewer a page).
PAGE_RELATED = ("run", "run__agent__project", "tool_call", "tool_call__step", "evidence")


def in_projects(approvals, projects: set[int] | None):
    """The approvals of runs of these projects' agents (None: every project's)."""
    return approvals if projects is None else approvals.filter(run__agent__project_id__in=projects)


def approvals_pending_count(projects: set[int] | None = None) -> int:
    return in_projects(Approval.objects.filter(status=Approval.Status.PENDING), projects).count()


def approvals_pending_page(*, page=1, per_page: int = PAGE_SIZE, projects: set[int] | None = None) -> Page:
    """One page of the pending approvals, oldest first; its object_list holds PendingApproval
    items with what an operator needs to decide them (9 queries at most, however many approvals wait
    and however long their runs are). A page number out of range gives the last page."""
    paginator = Paginator(
        in_projects(Approval.objects.filter(status=Approval.Status.PENDING), projects)
        .select_related(*PAGE_RELATED)
        .order_by("requested_at", "pk"),
        per_page,
    )
    page_obj = paginator.get_page(page)
    page_obj.object_list = _pending_items(list(page_obj.object_list))
    return page_obj


def _pending_items(approvals: list[Approval]) -> list[PendingApproval]:
    if not approvals:
        return []
    upto: dict[int, int] = {}
    for approval in approvals:
        upto[approval.run_id] = max(upto.get(approval.run_id, -1), approval.tool_call.step.index)
    steps, results = runs_shown(upto)
    # Its sensitive fields mask the arguments; the queue's controls and the API read the rest. The
    # tools the evidence quotes mask what it quotes: all these tools are read in one query.
    stored = _EvidenceRows(approvals)
    tools = tools_read({a.tool_call.tool_name for a in approvals} | stored.quoted)
    supervision = approvals_supervision(approvals, tools=tools)
    stored.sensitive_by_tool = {name: tools[name]["sensitive_fields"] for name in stored.quoted
                                if name in tools and tools[name]["sensitive_fields"]}
    now = timezone.now()
    pending = []
    for approval in approvals:
        run, call = approval.run, approval.tool_call
        step_index = call.step.index
        run_steps = steps.get(run.pk, {})
        known = known_text(run, step_index, run_steps, results.get(run.pk, ()))

        said = assistant_text(call.step.message)
        if not said and step_index - 1 in run_steps:
            said = assistant_text(run_steps[step_index - 1][1])

        item = PendingApproval(
            approval=approval,
            run=run,
            call=call,
            model_said=said,
            expired=approval.expires_at is not None and approval.expires_at <= now,
            supervision=supervision[approval.pk],
        )
        sensitive = item.supervision.sensitive_fields
        arguments = None
        try:
            arguments = bounded_loads(call.arguments or "{}")
        except ValueError as exc:
            problem = "nested too deeply to show" if isinstance(exc, JsonTooDeep) else "not valid JSON"
            if sensitive:
                item.arguments_problem = f"The arguments are {problem}; they are hidden because this tool has sensitive fields."
            else:
                item.arguments_problem = f"The arguments are {problem}:"
                item.raw_arguments = call.arguments
        else:
            item.lines = argument_lines(
                arguments, sensitive_fields=sensitive, unseen=lambda k, v, known=known: unseen_identifiers(k, v, known)
            )
            item.unseen = unseen_in_lines(item.lines)
        # What the model had read and where each value came from, masked as the tools say today.
        item.evidence = stored.shown(approval.pk, arguments=arguments, sensitive_fields=sensitive)
        (item.outside_paths, item.state, item.state_checked_at, item.state_requested_at,
         item.shown_at) = stored.facts(approval.pk)
        item.twin_row = twin_row(approval, call, stored.twin_fields(approval.pk))
        if approval.status == Approval.Status.PENDING and approval.edited_arguments:
            item.proposed_lines = argument_lines(
                bounded_loads(approval.edited_arguments), sensitive_fields=sensitive,
                unseen=lambda k, v, known=known: unseen_identifiers(k, v, known),
            )
        pending.append(item)
    return pending


class _EvidenceRows:
    """The stored evidence of a page of approvals (CallEvidence), read in one query, and the names
    of the tools it quotes (whose sensitive fields mask what it quotes of them)."""

    def __init__(self, approvals: list[Approval]):
        self.rows, self.twin_rows = {}, {}
        if all(Approval.evidence.is_cached(a) for a in approvals):  # read with them (PAGE_RELATED)
            found = [getattr(a, "evidence", None) for a in approvals]
        else:
            found = CallEvidence.objects.filter(approval_id__in=[a.pk for a in approvals])
        for evidence in found:
            if evidence is None:
                continue
            self.rows[evidence.approval_id] = (
                evidence.data or {}, evidence.outside_paths or [], evidence.state or {}, evidence.state_checked_at,
                evidence.state_requested_at, evidence.shown_at,
            )
            self.twin_rows[evidence.approval_id] = {name: getattr(evidence, name) for name in EVIDENCE_FIELDS}
        self.quoted = set(tools_quoted(row[0] for row in self.rows.values()))
        self.sensitive_by_tool: dict[str, list[str]] = {}  # of the quoted tools: set by whoever read them

    def shown(self, approval_id: int, *, arguments, sensitive_fields) -> dict:
        if approval_id not in self.rows:
            return {}
        return evidence_shown(self.rows[approval_id][0], arguments=arguments, sensitive_fields=sensitive_fields,
                              sensitive_by_tool=self.sensitive_by_tool)

    def twin_fields(self, approval_id: int) -> dict:
        return self.twin_rows.get(approval_id, {})

    def facts(self, approval_id: int) -> tuple[list[str], dict, datetime | None, datetime | None, datetime | None]:
        _data, outside, state, checked, asked, shown = self.rows.get(approval_id, ({}, [], {}, None, None, None))
        return list(outside), dict(state), checked, asked, shown


# --- What a run's model was shown: the identifiers a call may use -------------------------------


def approvals_recent_decisions(*, limit: int = AUDIT_LIMIT, projects: set[int] | None = None) -> list[Approval]:
    """The latest decisions (by people, policies or expiry), newest first: the audit trail."""
    return list(
        in_projects(Approval.objects.exclude(status=Approval.Status.PENDING), projects)
        .select_related("tool_call")
        .defer("tool_call__arguments", "tool_call__result", "tool_call__result_text")
        .order_by("-decided_at", "-pk")[:limit]
    )


def approval_decision_text(approval: Approval) -> str:
    """ "approved by alice at 2025-01-02 10:00:00 UTC" (after "Already" in messages)."""
    when = f" at {timezone.localtime(approval.decided_at):%Y-%m-%d %H:%M:%S %Z}" if approval.decided_at else ""
    if approval.status == Approval.Status.EXPIRED and not approval.decided_by_name:
        return f"expired{when}"
    if approval.status == Approval.Status.CLOSED:
        return f"closed: the run ended{when}"
    return f"{approval.status} by {approval.decider}{when}"


def approvals_archived(*, run_id: int | None = None, after: int = 0, limit: int = ARCHIVE_PAGE,
                       projects: set[int] | None = None) -> list[ArchivedApproval]:
    """Decisions of deleted (pruned) runs in the order they were archived: the `limit` rows after
    the archived row `after` (pages by key, so rows archived meanwhile neither repeat nor hide).
    With `projects`, those archived in these projects (by the project kept with the row, never by
    the agent's name: another project's agent may carry that name today)."""
    rows = ArchivedApproval.objects.filter(pk__gt=after).order_by("pk")
    if projects is not None:
        rows = rows.filter(project_id__in=projects)
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    return list(rows[:limit])


@dataclass(frozen=True)
class Waiting:
    """What waits for people, as the header badge shows it."""

    count: int
    oldest_requested_at: datetime | None  # None when nothing waits
    oldest_waited_seconds: float | None
    expiring: int = 0  # of them, warned that they will expire soon


def approvals_waiting(projects: set[int] | None = None) -> Waiting:
    """How many approvals wait, since when the oldest has, and how many were warned that they
    expire soon: one query over the pending rows (status, requested_at)."""
    found = in_projects(Approval.objects.filter(status=Approval.Status.PENDING), projects).aggregate(
        n=Count("pk"), oldest=Min("requested_at"), expiring=Count("pk", filter=Q(warned_at__isnull=False)),
    )
    oldest = found["oldest"] if found["n"] else None
    waited = max(0.0, (timezone.now() - oldest).total_seconds()) if oldest else None
    return Waiting(found["n"], oldest, waited, found["expiring"])
