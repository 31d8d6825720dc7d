"""Twins: calls of the same tool on the same thing (its identifier fields' values, or all its
arguments when it names none), waiting in another run or run recently. A person deciding one
sees the others; nothing approves a call automatically while a twin of it ran in the window.

The key is a keyed hash (like the arguments' hash) of the tool's name and those values, stored
with the call's evidence when it is asked about (runs/models/evidence.py), so finding twins is
one indexed query."""
import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
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


def twins_attach(items: list) -> None:
    """Set each queue item's `twins` (the others waiting or run in the window): issue 47's twins."""
    for item in items:
        item.twins = []
