"""Twins: calls of the same tool on the same thing (its identifier fields' values, or all its
arguments when it names none), waiting in another run or run recently. A person deciding one
sees the others; nothing approves a call automatically while a twin of it ran in the window.

The key is a keyed hash (like the arguments' hash) of the tool's name and those values, stored
with the call's evidence when it is asked about (runs/models/evidence.py), so finding twins is
two indexed queries. Twins are looked for in the call's own project only: nobody learns of another
team's runs. A single Approve of a call with twins is allowed (its card names them); approving it
with others (bulk) or with a grant for the rest of its run needs them confirmed by name
(`twins_check`), and each decision keeps the twins its decider was shown (`twins_record_shown`)."""
import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from runs.models import Approval, CallEvidence, ToolCall

DEFAULT_WINDOW_HOURS = 24


def window() -> timedelta:
    return timedelta(hours=getattr(settings, "TWIN_WINDOW_HOURS", DEFAULT_WINDOW_HOURS))


def call_identity(tool_name: str, arguments: Any, identifier_fields: list[str] | tuple[str, ...] = ()) -> str:
    """The key twins share: the tool and its identifying values, hashed with ARGS_HASH_KEY ("" when
    the arguments are not an object). Strings are compared trimmed and case-folded: ORD-1001 and
    " ord-1001" name the same order."""
    if not isinstance(arguments, dict):
        return ""
    fields = [f for f in identifier_fields if f in arguments] if identifier_fields else sorted(arguments)
    if identifier_fields and not fields:
        return ""  # none of its identifiers given: nothing to compare on

    def norm(value):
        if isinstance(value, str):
            return value.strip().casefold()
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        if isinstance(value, list):
            return [norm(v) for v in value]
        return value

    text = json.dumps([tool_name, {f: norm(arguments[f]) for f in fields}], sort_keys=True, ensure_ascii=False)
    return hmac.new(settings.ARGS_HASH_KEY.encode(), text.encode(), hashlib.sha256).hexdigest()


def _ago(when, now) -> str:
    seconds = max(0, int((now - when).total_seconds()))
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def twins_ran(*, project_id: int | None, identity: str, exclude_run_id: int | None = None, now=None) -> list[str]:
    """In words, the twins that ran (their call finished, for better or worse) in the window:
    ["ran 3 min ago in run 17: succeeded"]. One indexed query."""
    if not identity:
        return []
    now = now or timezone.now()
    rows = (
        CallEvidence.objects.filter(identity=identity, project_id=project_id, created_at__gte=now - window())
        .filter(approval__tool_call__status__in=[ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED, ToolCall.Status.UNKNOWN],
                approval__status=Approval.Status.APPROVED)
        .values_list("approval__run_id", "approval__tool_call__status", "approval__tool_call__finished_at", "created_at")
        .order_by("-created_at")[:5]
    )
    found = []
    for run_id, status, finished_at, created_at in rows:
        if run_id == exclude_run_id:
            continue
        found.append(f"ran {_ago(finished_at or created_at, now)} in run {run_id}: {status}")
    return found


# --- Twins of calls a person is shown ---------------------------------------------------------------

TWINS_SHOWN = 10  # per call: the waiting ones first, then the newest
ROWS_READ = 500  # the evidence rows one read may bring, however many twins wait

WAITING = "waiting"
_NOT_DONE = {str(Approval.Status.REJECTED), str(Approval.Status.EXPIRED)}
_RAN = {ToolCall.Status.SUCCEEDED: "succeeded", ToolCall.Status.FAILED: "failed", ToolCall.Status.UNKNOWN: "outcome unknown"}
_FIELDS = (
    "approval_id", "project_id", "identity", "tool_name", "created_at", "twins_at_decision", "approval__run_id",
    "approval__tool_call_id", "approval__status", "approval__requested_at", "approval__decided_at",
    "approval__tool_call__status", "approval__tool_call__finished_at",
)


# The fields of an approval's own evidence row that twin_row takes from what the queue already read.
EVIDENCE_FIELDS = ("approval_id", "project_id", "identity", "tool_name", "created_at", "twins_at_decision")


def twin_row(approval: Approval, call: ToolCall, evidence: dict) -> dict | None:
    """An approval's row as _rows reads it, from its evidence's EVIDENCE_FIELDS and the approval
    and call the queue read anyway (its twins then cost one query, not two); None without an identity."""
    if not evidence.get("identity"):
        return None
    return {**evidence, "approval__run_id": approval.run_id, "approval__tool_call_id": approval.tool_call_id,
            "approval__status": approval.status, "approval__requested_at": approval.requested_at,
            "approval__decided_at": approval.decided_at, "approval__tool_call__status": call.status,
            "approval__tool_call__finished_at": call.finished_at}


def _rows(approval_ids, *, now, projects: set[int] | None = None, own: list[dict] | None = None) -> list[dict]:
    """Two indexed queries: the evidence rows of these approvals (of `projects`, None: any; or
    `own`, those rows already read, from twin_row), then those of every call sharing their tool,
    identifying values and project that waits, or was asked or decided in the window (the newest
    ROWS_READ). Newest first."""
    if own is None:
        own_rows = CallEvidence.objects.filter(approval_id__in=list(approval_ids)).exclude(identity="")
        if projects is not None:
            own_rows = own_rows.filter(project_id__in=projects)
        own = list(own_rows.values(*_FIELDS))
    if not own:
        return []
    keys = {(row["identity"], row["project_id"]) for row in own}
    since = now - window()
    others = CallEvidence.objects.filter(identity__in={identity for identity, _ in keys}).exclude(
        approval_id__in=[row["approval_id"] for row in own]
    ).filter(Q(approval__status=Approval.Status.PENDING) | Q(created_at__gte=since) | Q(approval__decided_at__gte=since))
    project_ids = {project_id for _, project_id in keys}
    if None not in project_ids:
        others = others.filter(project_id__in=project_ids)
    found = own + [row for row in others.order_by("-created_at", "-approval_id").values(*_FIELDS)[:ROWS_READ]
                   if (row["identity"], row["project_id"]) in keys]
    found.sort(key=lambda row: (row["created_at"], row["approval_id"]), reverse=True)
    return found


def _state(row: dict, now) -> tuple[str, str] | None:
    """(state, words) of a twin as the person deciding another call should read it; None for a
    call nobody decided before its run ended (it never ran)."""
    run, status = row["approval__run_id"], row["approval__status"]
    if status == Approval.Status.PENDING:
        return WAITING, f"also waiting in run {run}"
    if status == Approval.Status.CLOSED:
        return None
    decided = row["approval__decided_at"] or row["created_at"]
    if status != Approval.Status.APPROVED:  # rejected, expired: it did not run
        return str(status), f"{status} {_ago(decided, now)} in run {run}"
    call_status = row["approval__tool_call__status"]
    if call_status in _RAN:
        return str(call_status), f"ran {_ago(row['approval__tool_call__finished_at'] or decided, now)} in run {run}: {_RAN[call_status]}"
    if call_status == ToolCall.Status.STARTED:
        return "running", f"approved {_ago(decided, now)} in run {run}, running now"
    return "approved", f"approved {_ago(decided, now)} in run {run}, not run yet"


def _twins_of(row: dict, rows: list[dict], now, limit: int | None = TWINS_SHOWN) -> list[dict]:
    """The twins of one call among `rows`: its own approval and the other approvals of its call
    (asked again after a crash) left out, one entry per call (its newest approval), those waiting
    first, then the newest; [{"approval", "run", "state", "words"}]."""
    since = now - window()
    found, calls = [], {row["approval__tool_call_id"]}
    for other in rows:  # newest first
        if (other["identity"], other["project_id"]) != (row["identity"], row["project_id"]):
            continue
        if other["approval__tool_call_id"] in calls:
            continue
        recent = other["created_at"] >= since or (other["approval__decided_at"] or other["created_at"]) >= since
        if other["approval__status"] != Approval.Status.PENDING and not recent:
            continue
        state = _state(other, now)
        if state is None:
            continue
        calls.add(other["approval__tool_call_id"])
        found.append({"approval": other["approval_id"], "run": other["approval__run_id"], "state": state[0], "words": state[1]})
    found.sort(key=lambda twin: twin["state"] != WAITING)  # stable: newest first within each
    return found[:limit]


def twins_attach(items: list, *, own_rows: list[dict] | None = None) -> None:
    """Set each queue item's `twins`, the other calls of its project on the same thing, waiting in
    any run or asked or decided in the window: [{"approval", "run", "state", "words": "also waiting
    in run 42" | "ran 3 min ago in run 17: succeeded"}]. A decided item keeps the twins its decider
    was shown (`twins_at_decision`). Two queries, however many items; one with `own_rows`, the
    items' own rows already read (twin_row)."""
    for item in items:
        item.twins = []
    if not items:
        return
    now = timezone.now()
    rows = _rows([item.approval.pk for item in items], now=now, own=own_rows)
    own = {row["approval_id"]: row for row in rows}
    for item in items:
        row = own.get(item.approval.pk)
        if row is None:
            continue
        if item.approval.status != Approval.Status.PENDING:
            item.twins = list(row["twins_at_decision"] or [])
        else:
            item.twins = _twins_of(row, rows, now)


def twins_record_shown(approval: Approval) -> None:
    """Keep on the decided approval's evidence the twins its decider was shown (the card shows the
    same ones): what they knew, for later review. A call without twins keeps []."""
    if approval.status == Approval.Status.EXPIRED:
        return  # decided by the clock, not by the person who clicked too late
    now = timezone.now()
    rows = _rows([approval.pk], now=now)
    own = next((row for row in rows if row["approval_id"] == approval.pk), None)
    twins = _twins_of(own, rows, now) if own is not None else []
    if twins:
        CallEvidence.objects.filter(approval_id=approval.pk).update(twins_at_decision=twins)


# --- Twins in a selection: approved together only when confirmed by name ----------------------------


class TwinsUnconfirmed(Exception):
    """Approving calls together (in bulk, or with a grant for the rest of a run) while they have
    twins needs the twins confirmed by name; `conflicts` says which, `confirm` the ids to name."""

    def __init__(self, conflicts: list[dict]):
        self.conflicts = conflicts
        self.confirm = confirmation_needed(conflicts)
        super().__init__(conflicts_text(conflicts))


def selection_conflicts(approval_ids, *, projects: set[int] | None = None) -> list[dict]:
    """The twins of a selection of approvals (those waiting, of `projects`; None: any), one entry
    per thing acted on: {"approvals": [{"id", "run", "tool"}] (the selected ones, in the
    selection's order), "twins": [the others on it, waiting, or approved or run in the window, as
    twins_attach gives them; rejected ones are only shown on the cards], "words": "#12 cancel_order in run 41 and #13 cancel_order in run 42
    act on the same thing", "confirm": [their ids]}. A selected call alone on its thing is in none.
    Two queries."""
    ids = list(dict.fromkeys(int(pk) for pk in approval_ids))
    now = timezone.now()
    rows = _rows(ids, now=now, projects=projects)
    chosen = set(ids)
    selected = {r["approval_id"]: r for r in rows if r["approval_id"] in chosen and r["approval__status"] == Approval.Status.PENDING}
    groups: dict[tuple, dict] = {}
    for approval_id in ids:
        row = selected.get(approval_id)
        if row is None:
            continue
        group = groups.setdefault((row["project_id"], row["identity"]), {"approvals": [], "twins": []})
        group["approvals"].append({"id": approval_id, "run": row["approval__run_id"], "tool": row["tool_name"]})
        known = {twin["approval"] for twin in group["twins"]}
        for twin in _twins_of(row, rows, now, limit=None):
            if twin["state"] in _NOT_DONE:
                continue  # rejected or expired: it did not run, and approving this one does not repeat it
            if twin["approval"] not in selected and twin["approval"] not in known:
                group["twins"].append(twin)
                known.add(twin["approval"])
    conflicts = []
    for group in groups.values():
        if len(group["approvals"]) < 2 and not group["twins"]:
            continue
        group["confirm"] = [a["id"] for a in group["approvals"]] + [t["approval"] for t in group["twins"]]
        group["words"] = _conflict_words(group)
        conflicts.append(group)
    return conflicts


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _conflict_words(group: dict) -> str:
    names = [f"#{a['id']} {a['tool']} in run {a['run']}" for a in group["approvals"]]
    verb = "act" if len(names) > 1 else "acts"
    others = [f"#{t['approval']} ({t['words']})" for t in group["twins"]]
    return f"{_and(names)} {verb} on the same thing" + (f" as {_and(others)}" if others else "")


def conflicts_text(conflicts: list[dict]) -> str:
    """ "#12 cancel_order in run 41 and #13 cancel_order in run 42 act on the same thing." """
    return "; ".join(conflict["words"] for conflict in conflicts) + "." if conflicts else ""


def confirmation_needed(conflicts: list[dict]) -> list[int]:
    """The approval ids a person must name to approve these conflicts anyway, in order."""
    return list(dict.fromkeys(pk for conflict in conflicts for pk in conflict["confirm"]))


def confirmed_ids(values) -> set[int]:
    """The ids a person confirmed: ints, or form values such as "12,13" (one per checkbox)."""
    found = set()
    for value in values or ():
        for part in str(value).split(","):
            part = part.strip()
            if part.isascii() and part.isdigit() and len(part) <= 18:
                found.add(int(part))
    return found


def twins_check(approval_ids, *, confirmed, projects: set[int] | None = None) -> None:
    """Raise TwinsUnconfirmed unless every twin of the selection is among `confirmed` (ids): what
    bulk approval and a grant for the rest of a run ask before deciding anything."""
    conflicts = selection_conflicts(approval_ids, projects=projects)
    if conflicts and not set(confirmation_needed(conflicts)) <= set(confirmed or ()):
        raise TwinsUnconfirmed(conflicts)
