"""The evidence of one call, computed once when the loop asks about it and stored with its approval
(CallEvidence.data): what the model had just read, where each argument value came from, and the
model's own words before the call.

Computed from the journal the loop keeps, never guessed: the run's system prompt and task, the
operators' messages (OperatorMessage rows, each recorded with the step whose request carried it),
and the results of the calls before the asking step (the tool messages the model was sent; a
search_memory result holds memory facts). The order of the conversation decides "first": the
system prompt, the task, then step by step the messages sent before a step's request and the
results of its calls. How a value is matched: match.py.

Values copied from a tool result whose tool reads outside content (HTTP or MCP tools, or one
marked reads_outside_content) are marked, since that is how injected text reaches arguments;
their argument paths go to the rules as CallFacts.outside_paths. Sensitive fields stay masked
everywhere (a sensitive argument's value is traced but never shown, nor its surrounding text)."""
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.db.models.functions import Length, Substr

from hosting.text import loads as bounded_loads
from runs.models import OperatorMessage, Step, ToolCall
from runs.supervision.evidence.match import Needle, around, looked_for
from runs.supervision.rules.conditions import json_path
from toolsapp.executors import reaches_outside as kind_reaches_outside
from toolsapp.models import Tool
from toolsapp.sensitive import MASK, masked, redact, sensitive_values

READ_MAX = 8  # results and messages listed under "What the model had just read"
READ_CHARS = 20_000  # of each result, shown and searched (as provenance.KNOWN_RESULT_CHARS)
CONTEXT_CHARS = 60  # shown each side of a value where it was found
SAID_CHARS = 4_000
# Values traced one by one; past these, a value is not searched and counts as from outside
# content for the rules (a flag too many, never one too few).
MAX_VALUES = 300
MEMORY_READS = ("search_memory",)  # its results are memory facts (save_memory echoes the model)

SYSTEM, TASK, OPERATOR, MEMORY, TOOL, MODEL = "system", "task", "operator", "memory", "tool", "model"
MODEL_WORDS = "the model wrote this"


@dataclass
class Evidence:
    """What the gate stores with an approval (runs.models.CallEvidence)."""

    data: dict = field(default_factory=dict)
    outside_paths: list[str] = field(default_factory=list)


class Source:
    """One text the model was shown: the system prompt, the task, an operator's message, or a
    tool's result (`sensitive_fields`: that tool's, masking what people are shown of it)."""

    def __init__(self, kind: str, text: str, *, step: int | None = None, tool: str = "", call_pk: int | None = None,
                 by: str = "", outside: bool = False, sensitive_fields: Iterable[str] = (), arguments: Any = None,
                 chars: int | None = None):
        self.kind, self.text, self.step, self.tool, self.call_pk = kind, text or "", step, tool, call_pk
        self.by, self.outside = by, outside
        self.sensitive_fields = [f for f in sensitive_fields or () if isinstance(f, str)]
        self.arguments = arguments
        self.chars = chars if chars is not None else len(self.text)

    @property
    def is_result(self) -> bool:
        return self.kind in (TOOL, MEMORY)

    @cached_property
    def folded(self) -> str:
        return self.text.lower()

    @cached_property
    def shown(self) -> str:
        """The text as people see it: a result pretty-printed, its tool's sensitive fields masked."""
        if not self.is_result:
            return self.text
        return result_shown(self.text, self.sensitive_fields, arguments=self.arguments)

    @cached_property
    def quoted(self) -> str:
        """The same on one line, where a value is quoted with the text around it."""
        if not self.is_result:
            return self.text
        return result_shown(self.text, self.sensitive_fields, arguments=self.arguments, indent=None)

    def attribution(self) -> dict:
        where = {"source": self.kind, "outside": self.outside}
        if self.kind == SYSTEM:
            return {**where, "words": "from the system prompt"}
        if self.kind == TASK:
            return {**where, "words": "from the task"}
        if self.kind == OPERATOR:
            return {**where, "words": f"from {self.by or 'an operator'}'s message at step {self.step}", "by": self.by,
                    "step": self.step}
        words = f"from {self.tool}'s result at step {self.step}"
        if self.kind == MEMORY:
            words = f"from a memory fact ({self.tool}'s result at step {self.step})"
        return {**where, "words": words, "tool": self.tool, "step": self.step, "call_pk": self.call_pk}

    def read_entry(self) -> dict:
        if self.kind == OPERATOR:
            return {"kind": "operator", "step": self.step, "by": self.by, "text": self.text}
        shown = self.shown
        # Whole when it was fetched whole; else the length the result has in the journal.
        chars = len(shown) if self.chars <= READ_CHARS else self.chars
        return {"kind": "tool", "tool": self.tool, "step": self.step, "call_pk": self.call_pk, "outside": self.outside,
                "text": shown[:READ_CHARS], "chars": chars}


# --- Masking a result for people -----------------------------------------------------------------


def result_shown(text: str, sensitive_fields: Iterable[str], *, arguments: Any = None, indent: int | None = 2) -> str:
    """A tool result as a person is shown it: JSON, pretty-printed (on one line when `indent` is
    None), with the tool's sensitive fields masked at any depth (also inside JSON text a field
    holds, as a cut result's preview does), and the call's own sensitive argument values blanked
    out wherever the result repeats them. A result that is not JSON (cut short) has each
    sensitive field's value masked where it appears."""
    names = [f for f in sensitive_fields or () if isinstance(f, str)]
    try:
        data = bounded_loads(text)
    except ValueError:
        shown = fields_masked_in_text(text, names)
    else:
        if names:
            data = _strings_masked(masked(data, names), names)
        shown = json.dumps(data, indent=indent, ensure_ascii=False)
    if names and arguments is not None:
        shown = redact(shown, sensitive_values(arguments, names))
    return shown


def _strings_masked(value, names):
    if isinstance(value, dict):
        return {k: _strings_masked(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings_masked(v, names) for v in value]
    if isinstance(value, str) and '"' in value:
        return fields_masked_in_text(value, names)
    return value


def fields_masked_in_text(text: str, names: Iterable[str]) -> str:
    """JSON text (perhaps cut short) with the value of each field named in `names` as the mask."""
    names = sorted({n for n in names if n}, key=len, reverse=True)
    if not names or not text:
        return text
    key = re.compile(r'"(?:' + "|".join(re.escape(n) for n in names) + r')"\s*:\s*', re.IGNORECASE)
    out, at = [], 0
    for found in key.finditer(text):
        if found.start() < at:
            continue  # inside a value already masked
        out += [text[at:found.end()], json.dumps(MASK, ensure_ascii=False)]
        at = _value_end(text, found.end())
    return "".join(out) + text[at:]


_BARE_VALUE = re.compile(r"[^,}\]\s]*")


def _value_end(text: str, start: int) -> int:
    """Where the JSON value that starts at `start` ends (the text's end when it is cut short)."""
    if start >= len(text) or text[start] not in '"{[':
        return _BARE_VALUE.match(text, start).end()
    depth, in_string, at = 0, False, start
    while at < len(text):
        char = text[at]
        if in_string:
            if char == "\\":
                at += 1
            elif char == '"':
                in_string = False
                if depth == 0:
                    return at + 1
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return at + 1
        at += 1
    return len(text)


# --- Where each value came from -----------------------------------------------------------------


def scalars(value: Any, parts: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """Each scalar of the arguments with its path's parts, in the arguments' order."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from scalars(item, (*parts, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from scalars(item, (*parts, index))
    else:
        yield parts, value


def first_seen(value: Any, sources: list[Source]) -> tuple[Source, Needle] | None:
    """The first source (in conversation order) that holds `value`, by match.py's rule."""
    needle = Needle(value)
    for source in sources:
        if needle.find(source.text, json_text=source.is_result, folded=source.folded if needle.fold else None):
            return source, needle
    return None


def _context(source: Source, needle: Needle) -> dict:
    """The value where it was found, with the text around it, from what people may see of the
    source (a result on one line); nothing when the value sits inside a masked part of it."""
    shown = source.quoted
    span = needle.find(shown, json_text=source.is_result)
    if span is None:
        return {}
    before, match, after = around(shown, *span, CONTEXT_CHARS)
    return {"before": before, "match": match, "after": after}


def values_traced(arguments: Any, sources: list[Source], sensitive_fields: Iterable[str] = ()) -> tuple[list[dict], list[str]]:
    """(where each scalar argument value came from, in argument order; the paths of those that
    came from outside content). A sensitive field's value is traced on its real value and shown
    as the mask, without the text around it."""
    names = {f.lower() for f in sensitive_fields or () if isinstance(f, str)}
    values, outside = [], []
    for number, (parts, value) in enumerate(scalars(arguments)):
        path = json_path(parts)
        if number >= MAX_VALUES:
            outside.append(path)
            continue
        secret = any(isinstance(p, str) and p.lower() in names for p in parts)
        entry = {"path": path, "value": MASK if secret else value}
        found = first_seen(value, sources) if looked_for(value) else None
        if found is None:
            entry.update(source=MODEL, words=MODEL_WORDS, outside=False)
        else:
            source, needle = found
            entry.update(source.attribution())
            if not secret:
                entry.update(_context(source, needle))
            if source.outside:
                outside.append(path)
        values.append(entry)
    return values, outside


def evidence_of(*, said: str, sources: list[Source], arguments: Any, sensitive_fields: Iterable[str] = ()) -> Evidence:
    """The evidence from what the model was shown (`sources`, in conversation order)."""
    values, outside = values_traced(arguments, sources, sensitive_fields)
    read = [s.read_entry() for s in [s for s in reversed(sources) if s.kind in (OPERATOR, TOOL, MEMORY)][:READ_MAX]]
    data = {"said": (said or "")[:SAID_CHARS], "read": read, "values": values}
    left_out = sum(1 for _ in scalars(arguments)) - len(values)
    if left_out > 0:
        data["values_left_out"] = left_out
    return Evidence(data=data, outside_paths=outside)


def evidence_shown(data: dict, *, arguments: Any, sensitive_fields: Iterable[str],
                   sensitive_by_tool: dict[str, list[str]]) -> dict:
    """Stored evidence as people may see it now, masked again by the sensitive fields as they are
    today (`sensitive_fields`: the call's tool's; `sensitive_by_tool`: those of the tools whose
    results it quotes): a field marked sensitive after the call was asked about is masked on its
    card too. `arguments`: the call's parsed arguments (None when unreadable: every value hidden
    if its tool has sensitive fields)."""
    names = {f.lower() for f in sensitive_fields or () if isinstance(f, str)}
    secret = {json_path(parts) for parts, _ in scalars(arguments)
              if any(isinstance(p, str) and p.lower() in names for p in parts)} if names else set()
    values = []
    for entry in data.get("values") or ():
        entry = dict(entry)
        if entry.get("path") in secret or (names and arguments is None):
            entry["value"] = MASK
            for key in ("before", "match", "after"):
                entry.pop(key, None)
        elif entry.get("tool") in sensitive_by_tool and "match" in entry:
            fields = sensitive_by_tool[entry["tool"]]
            entry["before"] = fields_masked_in_text(entry.get("before", ""), fields)
            entry["after"] = fields_masked_in_text(entry.get("after", ""), fields)
        values.append(entry)
    read = [
        {**entry, "text": result_shown(entry.get("text", ""), sensitive_by_tool[entry["tool"]])}
        if entry.get("kind") == "tool" and entry.get("tool") in sensitive_by_tool else entry
        for entry in data.get("read") or ()
    ]
    return {**data, "values": values, "read": read}


def tools_quoted(datas: Iterable[dict]) -> set[str]:
    """The tools whose results these evidences quote (to read their sensitive fields at once)."""
    return {entry["tool"] for data in datas for entry in [*(data.get("read") or ()), *(data.get("values") or ())]
            if isinstance(entry, dict) and entry.get("tool")}


def reads_outside(kind: str | None, marked: bool) -> bool:
    """Whether a tool's results count as outside content (a tool no longer there counts: its kind
    is unknown)."""
    return kind_reaches_outside(kind) or bool(marked)  # as the kind declares (toolsapp/executors/)


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


# --- Read from the journal -------------------------------------------------------------------------


def call_evidence(*, run, call: ToolCall, arguments: Any, tool) -> Evidence:
    """The evidence of `call` (its parsed `arguments`; `tool` its Tool) from its run's journal, in
    4 queries at most however long the run: the results before its step, the operators' messages,
    those results' tools, and the step before when the asking step has no words of its own."""
    step_index = call.step.index
    results = list(
        ToolCall.objects.filter(run_id=run.pk, step__index__lt=step_index).exclude(result_text="")
        .order_by("step__index", "index")
        .values_list("pk", "tool_name", "step__index", "index", "arguments",
                     Substr("result_text", 1, READ_CHARS), Length("result_text"))
    )
    notes = list(
        OperatorMessage.objects.filter(run_id=run.pk, step__index__lte=step_index)
        .order_by("step__index", "created_at", "pk").values_list("step__index", "author_name", "text")
    )
    names = {row[1] for row in results}
    tools = {
        name: (kind, marked, fields or [])
        for name, kind, marked, fields in Tool.objects.filter(name__in=names).values_list(
            "name", "kind", "reads_outside_content", "sensitive_fields")
    } if names else {}
    said = assistant_text(call.step.message)
    if not said and step_index > 1:
        said = assistant_text(Step.objects.filter(run_id=run.pk, index=step_index - 1).values_list(
            "message", flat=True).first())
    conversation = [((step, 0, n), Source(OPERATOR, text, step=step, by=by)) for n, (step, by, text) in enumerate(notes)]
    for pk, name, step, index, arguments_text, text, chars in results:
        kind, marked, fields = tools.get(name, (None, False, []))
        conversation.append(((step, 1, index), Source(
            MEMORY if name in MEMORY_READS else TOOL, text, step=step, tool=name, call_pk=pk,
            outside=reads_outside(kind, marked), sensitive_fields=fields,
            arguments=_parsed(arguments_text) if fields else None, chars=chars,
        )))
    sources = [Source(SYSTEM, (run.config or {}).get("system_prompt", "")), Source(TASK, run.task)]
    sources += [source for _, source in sorted(conversation, key=lambda pair: pair[0])]
    return evidence_of(said=said, sources=sources, arguments=arguments, sensitive_fields=tool.sensitive_fields or [])


def _parsed(text: str) -> Any:
    try:
        return bounded_loads(text or "{}")
    except ValueError:
        return None
