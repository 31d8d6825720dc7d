"""Reads for the approval queue: what an operator needs to decide a call, and the recent decisions.

The pure helpers at the top (masking, pretty-printing, spotting identifiers the model may have
invented) take plain data and return plain data; the selectors below only gather that data
in a fixed number of queries, however many approvals wait.
"""
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Q
from django.db.models.functions import Substr
from django.utils import timezone

from runs.models import Approval, ArchivedApproval, Run, Step, ToolCall
from runs.supervision.facts import Supervision, approvals_supervision
from toolsapp.sensitive import MASK
from toolsapp.text import JsonTooDeep
from toolsapp.text import loads as bounded_loads

AUDIT_LIMIT = 50
ARCHIVE_PAGE = 100
PAGE_SIZE = 50  # pending approvals per page of the queue and of the API
# What the model was shown, as scanned for identifiers: each tool result's first characters, and
# the whole text of one approval's run cut at this many characters.
KNOWN_RESULT_CHARS = 20_000
KNOWN_TEXT_CHARS = 1_000_000

# --- Identifiers the model may have made up ----------------------------------------------------

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# A whole value that is an identifier: ORD-1001, a UUID, a long number.
_WHOLE_ID = re.compile(rf"{_UUID}|[A-Za-z]{{2,}}-\d+|\d{{5,}}")
# Identifiers inside free text (a reason, an e-mail body). Stricter than a whole value, so
# "UTF-8" or "the year 2024" in prose are not taken for identifiers.
_EMBEDDED_ID = re.compile(rf"(?<![\w-])(?:{_UUID}|[A-Z]{{2,}}-\d{{3,}}|\d{{6,}})(?![\w-])")
# id, order_id, ticket-id, ORDER_ID, orderId, order_ids: such a key's whole value is an
# identifier. Not "paid" or "valid": the "id" must be a word of its own.
_ID_KEY = re.compile(r"(?:^|[_-])ids?$", re.IGNORECASE)
_ID_KEY_CAMEL = re.compile(r"[a-z]Ids?$")


def is_id_key(key: str | None) -> bool:
    return bool(key) and bool(_ID_KEY.search(key) or _ID_KEY_CAMEL.search(key))


def whole_identifier(key: str | None, value: Any) -> str | None:
    """The scalar value as an identifier when it is one as a whole (an "order_id", a UUID), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value) if is_id_key(key) else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if is_id_key(key) and text and len(text) <= 100 and not any(c.isspace() for c in text):
        return text
    return text if _WHOLE_ID.fullmatch(text) else None


def identifiers_in(key: str | None, value: Any) -> list[str]:
    """The identifiers one scalar argument value holds (`key` is its name, or its list's name)."""
    whole = whole_identifier(key, value)
    if whole is not None:
        return [whole]
    if not isinstance(value, str):
        return []
    return list(dict.fromkeys(_EMBEDDED_ID.findall(value.strip())))


def result_identifiers(text: str) -> str:
    """What of one tool result counts as shown, for identifiers: the values of its fields that
    are identifiers as a whole (an order's "order_id", a ticket's "id"), one a line. Not the ids
    that free text inside it mentions: a ticket's body is anyone's words ("cancel ORD-2001").
    A result that is not a JSON object (cut short, or a truncated preview) counts as a whole."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict) or data.get("truncated"):
        return text
    found: list[str] = []

    def walk(value: Any, key: str | None) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        else:
            whole = whole_identifier(key, value)
            if whole is not None:
                found.append(whole)

    walk(data, None)
    return "\n".join(found)


def identifier_seen(identifier: str, known_text: str) -> bool:
    """True when `identifier` appears in `known_text` as a whole token (ORD-10 is not in ORD-1001)."""
    pattern = rf"(?<![A-Za-z0-9]){re.escape(identifier)}(?![A-Za-z0-9])"
    return re.search(pattern, known_text, re.IGNORECASE) is not None


def unseen_identifiers(key: str | None, value: Any, known_text: str) -> list[str]:
    """Identifiers in one scalar value that never appeared in what the model was shown."""
    return [i for i in identifiers_in(key, value) if not identifier_seen(i, known_text)]


# --- Masked, pretty-printed arguments ------------------------------------------------------------


@dataclass(frozen=True)
class ArgumentLine:
    """One line of pretty-printed JSON arguments, so a template can mark single values."""

    indent: str
    key: str  # JSON-encoded key, or "" for list items and brackets
    text: str  # the JSON value, a bracket, or MASK
    comma: bool = False
    masked: bool = False
    unseen: tuple[str, ...] = ()


def argument_lines(
    arguments: Any, *, sensitive_fields: Iterable[str], unseen: Callable[[str | None, Any], list[str]]
) -> list[ArgumentLine]:
    """Pretty-print `arguments` as JSON lines, masking sensitive keys and flagging unseen ids.

    `unseen(key, value)` returns the unseen identifiers of one scalar value; masked values
    are never passed to it (a flag next to a mask would hint at what it hides).
    """
    sensitive = {f.lower() for f in sensitive_fields}
    lines: list[ArgumentLine] = []

    def emit(value: Any, *, key: str | None, label: str, depth: int, comma: bool) -> None:
        indent = "  " * depth
        if key is not None and label and key.lower() in sensitive:
            lines.append(ArgumentLine(indent, label, MASK, comma, masked=True))
            return
        if isinstance(value, dict) and value:
            lines.append(ArgumentLine(indent, label, "{"))
            items = list(value.items())
            for n, (k, v) in enumerate(items):
                emit(v, key=str(k), label=json.dumps(str(k), ensure_ascii=False), depth=depth + 1, comma=n < len(items) - 1)
            lines.append(ArgumentLine(indent, "", "}", comma))
        elif isinstance(value, list) and value:
            lines.append(ArgumentLine(indent, label, "["))
            for n, v in enumerate(value):
                # Items of a list take the list's name: order_ids: ["ORD-1", ...] holds ids.
                emit(v, key=key, label="", depth=depth + 1, comma=n < len(value) - 1)
            lines.append(ArgumentLine(indent, "", "]", comma))
        else:
            text = json.dumps(value, ensure_ascii=False)
            flagged = tuple(unseen(key, value)) if not isinstance(value, (dict, list)) else ()
            lines.append(ArgumentLine(indent, label, text, comma, unseen=flagged))

    emit(arguments, key=None, label="", depth=0, comma=False)
    return lines


def assistant_text(message: Any) -> str:
    """The text of an assistant message (a string, or a list of content parts)."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(p for p in parts if p).strip()
    return ""


def _message_text(message: Any) -> str:
    if isinstance(message, dict):
        content = message.get("content")
        if isinstance(content, str):
            return content
        if content is not None:
            return json.dumps(content, ensure_ascii=False)
    return ""


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
    routed_by: str = ""
    edit_json: str = ""  # the arguments to edit; "" when editing is not offered
    edit_refusal: str = ""  # why there is no edit control
    schema: dict = field(default_factory=dict)  # the tool's JSON schema, for the browser's check
    grant_refusal: str = ""  # why there are no "for this run" choices


def approvals_pending_count() -> int:
    return Approval.objects.filter(status=Approval.Status.PENDING).count()


def approvals_pending_page(*, page=1, per_page: int = PAGE_SIZE) -> Page:
    """One page of the pending approvals, oldest first; its object_list holds PendingApproval
    items with what an operator needs to decide them (7 queries at most, however many approvals wait
    and however long their runs are). A page number out of range gives the last page."""
    paginator = Paginator(
        Approval.objects.filter(status=Approval.Status.PENDING)
        .select_related("run", "tool_call", "tool_call__step")
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
    # Its sensitive fields mask the arguments; the queue's controls and the API read the rest.
    supervision = approvals_supervision(approvals)
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
        if approval.status == Approval.Status.PENDING and approval.edited_arguments:
            item.proposed_lines = argument_lines(
                bounded_loads(approval.edited_arguments), sensitive_fields=sensitive,
                unseen=lambda k, v, known=known: unseen_identifiers(k, v, known),
            )
        pending.append(item)
    return pending


# --- What a run's model was shown: the identifiers a call may use -------------------------------


def runs_shown(upto: dict[int, int]) -> tuple[dict[int, dict[int, tuple[list, Any]]], dict[int, list[tuple[int, str]]]]:
    """What each run's model was shown up to a step (`upto`: {run id: step index}), in 2 queries
    however many runs: {run: {step index: (preamble, message)}} for its steps up to that index,
    and {run: [(index of the asking step, result text cut to KNOWN_RESULT_CHARS)]} for the tool
    results before it (cut in the database)."""
    shown_steps, earlier_results = Q(), Q()
    for run_id, index in upto.items():
        shown_steps |= Q(run_id=run_id, index__lte=index)
        earlier_results |= Q(run_id=run_id, step__index__lt=index)
    steps: dict[int, dict[int, tuple[list, Any]]] = defaultdict(dict)
    results: dict[int, list[tuple[int, str]]] = defaultdict(list)
    if not upto:
        return steps, results
    for run_id, index, preamble, message in Step.objects.filter(shown_steps).values_list(
        "run_id", "index", "preamble", "message"
    ):
        steps[run_id][index] = (preamble or [], message)
    for run_id, step_index, text in (
        ToolCall.objects.filter(earlier_results)
        .exclude(result_text="")
        .values_list("run_id", "step__index", Substr("result_text", 1, KNOWN_RESULT_CHARS))
    ):
        results[run_id].append((step_index, text))
    return steps, results


def known_text(run: Run, step_index: int, run_steps: dict[int, tuple[list, Any]], run_results: Iterable[tuple[int, str]]) -> str:
    """The text a run's model had been shown when it asked for a call at `step_index`: the
    system prompt, the task, the preambles of its steps up to then, and the identifiers in the
    structured fields of the tool results before (see `result_identifiers`)."""
    known = [run.config.get("system_prompt", ""), run.task]
    for index, (preamble, _message) in sorted(run_steps.items()):
        if index <= step_index:
            known.extend(_message_text(m) for m in preamble)
    known.extend(result_identifiers(text) for index, text in run_results if index < step_index)
    # An identifier past the cut is flagged as unseen: a flag too many, never one too few.
    return "\n".join(known)[:KNOWN_TEXT_CHARS]


def unseen_in_lines(lines: list[ArgumentLine]) -> list[str]:
    return list(dict.fromkeys(i for line in lines for i in line.unseen))


def approvals_recent_decisions(*, limit: int = AUDIT_LIMIT) -> list[Approval]:
    """The latest decisions (by people, policies or expiry), newest first: the audit trail."""
    return list(
        Approval.objects.exclude(status=Approval.Status.PENDING)
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


def approvals_archived(*, run_id: int | None = None, after: int = 0, limit: int = ARCHIVE_PAGE) -> list[ArchivedApproval]:
    """Decisions of deleted (pruned) runs in the order they were archived: the `limit` rows after
    the archived row `after` (pages by key, so rows archived meanwhile neither repeat nor hide)."""
    rows = ArchivedApproval.objects.filter(pk__gt=after).order_by("pk")
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    return list(rows[:limit])


def approvals_oldest_pending() -> Approval | None:
    """The approval that has waited longest (its requested_at is the age the header shows), or
    None when nothing waits. One indexed query (status, requested_at)."""
    return (
        Approval.objects.filter(status=Approval.Status.PENDING)
        .only("pk", "run_id", "requested_at")
        .order_by("requested_at", "pk")
        .first()
    )
