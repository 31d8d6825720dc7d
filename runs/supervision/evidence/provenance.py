"""Identifier provenance: what a call's arguments hold that its run's model was never shown (the
system prompt, the task, what its steps said, the identifiers in its tool results). The queue
flags such values, and the loop's safeguard sends such a call to a person."""
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from django.db.models.functions import Substr

from runs.models import Run, Step, ToolCall
from runs.supervision.queue.argument_lines import ArgumentLine, argument_lines
from toolsapp.sensitive import sensitive_items

# What the model was shown, as scanned for identifiers: each tool result's first characters, and
# the whole text of one approval's run cut at this many characters.
KNOWN_RESULT_CHARS = 20_000
KNOWN_TEXT_CHARS = 1_000_000


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


def _message_text(message: Any) -> str:
    if isinstance(message, dict):
        content = message.get("content")
        if isinstance(content, str):
            return content
        if content is not None:
            return json.dumps(content, ensure_ascii=False)
    return ""


def runs_shown(upto: dict[int, int]) -> tuple[dict[int, dict[int, tuple[list, Any]]], dict[int, list[tuple[int, str]]]]:
    """What each run's model was shown up to a step (`upto`: {run id: step index}), in 1 query
    however many runs: {run: {step index: (preamble, message)}} for its steps up to that index,
    and {run: [(index of the asking step, result text cut to KNOWN_RESULT_CHARS)]} for the tool
    results before it (cut in the database)."""
    steps: dict[int, dict[int, tuple[list, Any]]] = defaultdict(dict)
    results: dict[int, list[tuple[int, str]]] = defaultdict(list)
    if not upto:
        return steps, results
    # The runs' steps up to the furthest index, each run's own bound applied here: one OR per run
    # in SQL cost Django more to compile (about 5 ms a query for a page of 50) than the database
    # took to answer. A waiting run has no steps after its asking one, so little is read twice.
    # The steps and their calls' results come in one query (a step's row once per call of it).
    last = max(upto.values())
    rows = (
        Step.objects.filter(run_id__in=upto, index__lte=last)
        .order_by("run_id", "index", "tool_calls__index")
        .values_list("run_id", "index", "preamble", "message", Substr("tool_calls__result_text", 1, KNOWN_RESULT_CHARS))
    )
    for run_id, index, preamble, message, text in rows:
        if index > upto[run_id]:
            continue
        steps[run_id][index] = (preamble or [], message)
        if text and index < upto[run_id]:
            results[run_id].append((index, text))
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



def sensitive_fields_unseen(
    arguments: Any, *, sensitive_fields: Iterable[str], unseen: Callable[[str | None, Any], list[str]]
) -> list[str]:
    """The names of the sensitive fields whose (masked) values hold an identifier `unseen` flags.

    Masking hides a value from people, not from the check: a sensitive `order_id` the run never
    saw must stop a rule as a visible one does. The answer names fields, never values."""

    def holds_unseen(value: Any, key: str | None) -> bool:
        if isinstance(value, dict):
            return any(holds_unseen(v, str(k)) for k, v in value.items())
        if isinstance(value, list):
            return any(holds_unseen(v, key) for v in value)
        return bool(unseen(key, value))

    return list(dict.fromkeys(key for key, value in sensitive_items(arguments, sensitive_fields)
                              if holds_unseen(value, key)))


def call_unseen_ids(
    *, run: Run, call: ToolCall, arguments: Any, sensitive_fields: Iterable[str]
) -> tuple[list[str], list[str]]:
    """(the identifiers in a call's (parsed) arguments that its run had not been shown before the
    call's step, as the queue flags them; the sensitive fields whose masked values hold such an
    identifier, by name), for the loop (2 queries, plus 1 when the step is not loaded)."""
    step_index = call.step.index
    steps, results = runs_shown({run.pk: step_index})
    known = known_text(run, step_index, steps.get(run.pk, {}), results.get(run.pk, ()))

    def unseen(key, value):
        return unseen_identifiers(key, value, known)

    lines = argument_lines(arguments, sensitive_fields=sensitive_fields, unseen=unseen)
    return unseen_in_lines(lines), sensitive_fields_unseen(arguments, sensitive_fields=sensitive_fields, unseen=unseen)
