"""The evidence of a waiting call in words, for the surfaces that are not the card: the chat
message and the e-mails tell the same story as the queue, from the same stored row
(CallEvidence, written when the call was asked about, masked then and again as the card masks it).

One story, in one order: the state now (the tool's read-only check), the twins (the same tool on
the same thing, waiting or run lately), the model's own words (quoted, and said to be the
model's, apart from the product's), what the model had just read (newest first, one line each),
and where each argument value came from. Plain data in, plain data out; only `evidence_read`
touches the database (the row, the quoted tools' sensitive fields, the twins: three queries).
The product's words here describe; they never argue for a decision.
"""
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace

from hosting.text import loads as bounded_loads
from runs.models import Approval, CallEvidence
from runs.supervision.evidence.sources import evidence_shown, tools_quoted
from runs.supervision.evidence.twins import twins_attach
from toolsapp.models import Tool
from toolsapp.sensitive import MASK

READ_PREVIEW_CHARS = 200  # of one result or message, on one line; the dashboard shows all
VALUE_CHARS = 120  # of one argument value
SAID_CHARS = 1000  # of the model's words
VALUES_SHOWN = 40  # argument values listed at most; the rest are counted

WORDS_OF_SOURCE = {
    "task": "from the task",
    "operator": "from an operator's message",
    "memory": "from a memory fact",
    "system": "from the agent's instructions",
    "model": "the model wrote this",
}
OUTSIDE = "[from outside content]"
NOTHING_READ = "nothing: no tool result or operator message came before this call"

# The sections' titles, the product's words. A surface may shorten the lines, never reword them.
STATE, TWINS, SAID, READ, VALUES = (
    "The state now",
    "The same tool on the same thing",
    "The model's words (quoted as it wrote them; not Agentsite's)",
    "What the model had just read (newest first)",
    "Where each value came from",
)


def age_text(seconds: float) -> str:
    """ "45 s", "4 min", "2 h 5 min", "3 d 4 h": as the header badge says it."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    minutes = s // 60
    if minutes < 60:
        return f"{minutes} min"
    hours = minutes // 60
    if hours < 24:
        return f"{hours} h {minutes % 60} min" if minutes % 60 else f"{hours} h"
    days = hours // 24
    return f"{days} d {hours % 24} h" if hours % 24 else f"{days} d"


@dataclass(frozen=True)
class Evidence:
    """What CallEvidence holds for one call, and its twins in words."""

    data: dict = field(default_factory=dict)  # CallEvidence.data: {"said", "read", "values"}
    outside_paths: tuple[str, ...] = ()
    state: dict = field(default_factory=dict)
    state_checked_at: datetime | None = None
    state_requested_at: datetime | None = None
    twins: tuple[str, ...] = ()
    sensitive_fields: tuple[str, ...] = ()  # the call's tool's: a value under one is never shown


@dataclass(frozen=True)
class Section:
    """One part of the story: its title (the product's words) and its lines. `model`: the lines
    are the model's own words, to be shown quoted and apart."""

    title: str
    lines: tuple[str, ...]
    model: bool = False


# --- reading ---------------------------------------------------------------------------------------


def evidence_read(approval: Approval, *, sensitive_fields=()) -> Evidence | None:
    """The approval's stored evidence, masked again as the card masks it (sources.evidence_shown:
    by the sensitive fields of its tool and of the tools it quotes, as they are today), and its
    twins; None when the call has no evidence row (asked before evidence was kept)."""
    row = CallEvidence.objects.filter(approval_id=approval.pk).first()
    if row is None:
        return None
    data = row.data if isinstance(row.data, dict) else {}
    try:
        arguments = bounded_loads(approval.tool_call.arguments or "{}")
    except ValueError:
        arguments = None  # evidence_shown hides every value then, when the tool has sensitive fields
    quoted = tools_quoted([data])
    sensitive_by_tool = {
        name: fields for name, fields in Tool.objects.filter(name__in=quoted).values_list("name", "sensitive_fields") if fields
    } if quoted else {}
    return Evidence(
        data=evidence_shown(data, arguments=arguments, sensitive_fields=list(sensitive_fields or ()),
                            sensitive_by_tool=sensitive_by_tool),
        outside_paths=tuple(row.outside_paths or ()),
        state=row.state if isinstance(row.state, dict) else {},
        state_checked_at=row.state_checked_at,
        state_requested_at=row.state_requested_at,
        twins=tuple(twins_words(approval)),
        sensitive_fields=tuple(sensitive_fields or ()),
    )


def twins_words(approval: Approval) -> list[str]:
    """The card's twins in its words (twins.twins_attach: "also waiting in run 42", "ran 3 min ago
    in run 17: succeeded"); a decided call's are those its decider was shown."""
    holder = SimpleNamespace(approval=approval, twins=[])
    twins_attach([holder])
    return [twin["words"] for twin in holder.twins if twin.get("words")]


# --- the lines -------------------------------------------------------------------------------------


def one_line(text, limit: int) -> str:
    """`text` on one line (runs of white space as one space), cut at `limit` characters with …"""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def state_line(evidence: Evidence, *, now: datetime) -> str:
    """ "By lookup_order: ORD-1001: cancelled, checked 4 s before this message (12:03:04 UTC)",
    "The check failed: …", or "" when the tool names no check. A message is read later than it
    is written: its age is said from the message, with the time."""
    state = evidence.state
    if not state:
        if evidence.state_requested_at is None:
            return ""
        asked = age_text((now - evidence.state_requested_at).total_seconds())
        return f"Not known yet: the check was asked {asked} before this message and had not answered"
    at = evidence.state_checked_at
    checked = f"checked {age_text((now - at).total_seconds())} before this message ({at:%H:%M:%S} UTC)" if at \
        else "checked at an unknown time"
    if not state.get("ok", False):
        return f"The check failed: {one_line(state.get('error') or 'no answer', READ_PREVIEW_CHARS)}, {checked}"
    answer = state.get("summary") or json.dumps(state.get("answer"), ensure_ascii=False, default=str)
    by = f"By {state['tool']}: " if state.get("tool") else ""
    return f"{by}{one_line(answer, READ_PREVIEW_CHARS)}, {checked}"


# A field of a tool result that says what state a thing is in ("status": "cancelled"): what a
# person deciding a change of that thing must see first. Only short string values: a state, not prose.
_STATE_FIELD = re.compile(r'"(status|state)"\s*:\s*"([^"\\\n]{1,60})"', re.IGNORECASE)
_STATE_SCAN_CHARS = 20_000


def reported_states(text) -> list[str]:
    """The states a result reports, in its words: ["status: cancelled"] (at most three), as the
    card marks them at a glance."""
    found = dict.fromkeys(f"{m.group(1).lower()}: {m.group(2)}" for m in _STATE_FIELD.finditer(str(text or "")[:_STATE_SCAN_CHARS]))
    return list(found)[:3]


def read_lines(evidence: Evidence) -> list[str]:
    """What the model had just read, newest first (as stored), one line each; a result's reported
    states first ("lookup_order's result at step 2 (status: cancelled): {…}")."""
    lines = []
    for item in evidence.data.get("read") or ():
        if not isinstance(item, dict):
            continue
        step = f" at step {item['step']}" if item.get("step") is not None else ""
        if item.get("kind") == "operator":
            who = f"{item['by']}'s message" if item.get("by") else "an operator's message"
            lines.append(f"{who}{step}: {one_line(item.get('text', ''), READ_PREVIEW_CHARS)}")
            continue
        outside = f" {OUTSIDE}" if item.get("outside") else ""
        states = reported_states(item.get("text", ""))
        said = f" ({', '.join(states)})" if states else ""
        lines.append(f"{item.get('tool') or 'a tool'}'s result{step}{outside}{said}: "
                     f"{one_line(item.get('text', ''), READ_PREVIEW_CHARS)}")
    return lines or [NOTHING_READ]


_KEY = re.compile(r'\.([A-Za-z_][\w-]*)|\["([^"]*)"\]')


def _under_sensitive(path: str, sensitive_fields) -> bool:
    names = {str(f).lower() for f in sensitive_fields}
    return bool(names) and any((a or b).lower() in names for a, b in _KEY.findall(path or ""))


def value_lines(evidence: Evidence) -> list[str]:
    """ "$.order_id: "ORD-1001" — from lookup_order's result at step 2", one per argument value,
    in argument order; a value from outside content is marked. Sensitive values stay masked: as
    stored, and again here by the tool's fields (a value is never shown because a row was wrong)."""
    values = [v for v in evidence.data.get("values") or () if isinstance(v, dict)]
    lines = []
    for item in values[:VALUES_SHOWN]:
        path = str(item.get("path", "$"))
        value = item.get("value")
        if value == MASK or _under_sensitive(path, evidence.sensitive_fields):
            shown = MASK
        else:
            shown = one_line(json.dumps(value, ensure_ascii=False, default=str), VALUE_CHARS)
        words = item.get("words") or _source_words(item)
        outside = item.get("outside") or path in evidence.outside_paths
        lines.append(f"{path}: {shown} — {words}" + (f" {OUTSIDE}" if outside else ""))
    if len(values) > VALUES_SHOWN:
        lines.append(f"… and {len(values) - VALUES_SHOWN} more values: the dashboard shows all")
    left_out = evidence.data.get("values_left_out")
    if isinstance(left_out, int) and left_out > 0:
        lines.append(f"… {left_out} more not traced: rules count them as from outside content")
    return lines


def _source_words(item: dict) -> str:
    if item.get("source") == "tool":
        step = f" at step {item['step']}" if item.get("step") is not None else ""
        return f"from {item.get('tool') or 'a tool'}'s result{step}"
    return WORDS_OF_SOURCE.get(item.get("source"), "the model wrote this")


def evidence_sections(evidence: Evidence, *, now: datetime) -> list[Section]:
    """The story in its order; a part with nothing to say is left out (but not what was read:
    "nothing" is worth knowing)."""
    sections = []
    state = state_line(evidence, now=now)
    if state:
        sections.append(Section(STATE, (state,)))
    if evidence.twins:
        sections.append(Section(TWINS, evidence.twins))
    said = (evidence.data.get("said") or "").strip()
    if said:
        sections.append(Section(SAID, (one_line(said, SAID_CHARS),), model=True))
    sections.append(Section(READ, tuple(read_lines(evidence))))
    values = value_lines(evidence)
    if values:
        sections.append(Section(VALUES, tuple(values)))
    return sections


def section_text(section: Section, *, limit: int, bullet: str = "- ") -> str:
    """A section's lines under `limit` characters, whole lines only; the lines left out are
    counted. The model's words are quoted."""
    if section.model:
        lines = [f"“{line}”" for line in section.lines]
        bullet = ""
    else:
        lines = list(section.lines)
    kept, used = [], 0
    for n, line in enumerate(lines):
        text = f"{bullet}{line}"
        rest = len(lines) - n - 1
        tail = len(f"\n… {rest} more: the dashboard shows all") if rest else 0
        if used + len(text) + tail > limit:
            if not kept:  # one long line: its start, rather than nothing
                kept.append(text[: max(1, limit - 1 - tail)] + "…")
            left = len(lines) - len(kept)
            if left:
                kept.append(f"… {left} more: the dashboard shows all")
            break
        kept.append(text)
        used += len(text) + 1
    return "\n".join(kept)


def evidence_plain(sections: list[Section], *, limit: int = 8000) -> str:
    """The story as plain text (the e-mails), each section under its title, `limit` at most."""
    parts, left = [], limit
    for n, section in enumerate(sections):
        # What the sections before left unused goes to the ones after.
        budget = left // (len(sections) - n) - len(section.title) - 3
        text = f"{section.title}:\n{section_text(section, limit=max(80, budget))}"
        parts.append(text)
        left -= len(text) + 2
    return "\n\n".join(parts)
