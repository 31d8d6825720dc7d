"""What a call's arguments hold that its run was never shown, for the loop's safeguard: the
identifiers the queue flags, and the sensitive fields whose masked values hold one (by name)."""
from collections.abc import Callable, Iterable
from typing import Any

from runs.models import Run, ToolCall
from runs.supervision.queue import argument_lines, known_text, runs_shown, unseen_identifiers, unseen_in_lines
from toolsapp.sensitive import sensitive_items


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
