"""Approval rules as plain data: which rule matches a destructive call, and whether a rule's
conditions are well formed.

A rule matches on the tool (a name or a glob pattern), on the run (agent, customer, the account
that launched it) and on argument values found by a small JSON path (`$.refund.amount`,
`$.items[0].sku`). Every condition must hold. Nothing here touches the database except
`rules_enabled`.

A pattern condition either matches the whole value (`fullmatch`, what the editor offers first) or
searches it (`matches`, kept with its meaning for the rules written before `fullmatch` existed):
`@example\.com` searched accepts "x@evil.test,y@example.com".
"""
import fnmatch
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2

from runs.models import Agent, ApprovalRule, RuleQuorumGroup

OPERATORS = {
    "eq": "equals",
    "ne": "does not equal",
    "lt": "is less than",
    "gt": "is greater than",
    "in": "is one of",
    "fullmatch": "matches, as a whole value, the RE2 pattern",
    "matches": "contains a match of the RE2 pattern",
    "present": "is present",
    "absent": "is absent",
    # Where the value came from (runs/supervision/evidence/sources.py): a tool result of a tool that
    # reads outside content (HTTP, MCP, or marked so), which is how injected text reaches arguments.
    "outside": "comes from outside content",
}
NO_VALUE_OPERATORS = ("present", "absent", "outside")
# A condition value that stands for the run's own customer ("refunds to the run's customer").
RUN_CUSTOMER = "$run.customer"
PATTERN_OPERATORS = ("fullmatch", "matches")
MAX_CONDITIONS = 20
MAX_PATTERN_CHARS = 500
_MISSING = object()
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the editor's error message, not a log line
_PATH_PART = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]")


@dataclass(frozen=True)
class RuleSpec:
    """A rule as read when a call is evaluated: the version recorded with the decision is this one."""

    id: int
    name: str
    version: int
    action: str
    agent_id: int | None = None
    tool_pattern: str = "*"
    conditions: tuple = ()
    customer: str = ""
    launched_by_id: int | None = None
    # A launcher name from before rules named accounts that matched no account: matches nobody.
    launcher_unresolved: str = ""
    group_id: int | None = None
    reason: str = ""
    escalate_after_seconds: int | None = None
    expiry_warning_seconds: int | None = None
    approvals_needed: int | None = None  # ask_quorum: how many people
    quorum_group_ids: tuple[int, ...] = ()  # ask_quorum: each gives one approval
    position: int = 100
    shadow: bool = False  # records what it would decide; never decides

    @property
    def label(self) -> str:
        return f"rule {self.name!r} v{self.version}"


@dataclass(frozen=True)
class CallFacts:
    """What a rule may look at: the call and its run."""

    tool_name: str
    arguments: Any  # the parsed JSON arguments (a dict for every valid call)
    agent_id: int | None
    customer: str = ""
    launched_by_id: int | None = None  # the account that launched the run; None when nobody (CLI, schedule)
    # The argument paths ("$.email", "$.items[0].sku") whose values came from outside content.
    outside_paths: tuple[str, ...] = ()


def rule_spec(rule: ApprovalRule, *, quorum_group_ids: tuple[int, ...] | None = None) -> RuleSpec:
    """The rule as plain data. `quorum_group_ids` when read with many rules at once; else its
    quorum's groups are read here (a rule being edited keeps the ones chosen: changes.py)."""
    if quorum_group_ids is None:
        quorum_group_ids = rule_quorum_group_ids(rule)
    return RuleSpec(
        id=rule.pk, name=rule.name, version=rule.version, action=rule.action, agent_id=rule.agent_id,
        tool_pattern=rule.tool_pattern or "*", conditions=tuple(rule.conditions or ()), customer=rule.customer,
        launched_by_id=rule.launched_by_id, launcher_unresolved=rule.launched_by_unresolved, group_id=rule.group_id, reason=rule.reason,
        escalate_after_seconds=rule.escalate_after_seconds,
        expiry_warning_seconds=rule.expiry_warning_seconds, approvals_needed=rule.approvals_needed,
        quorum_group_ids=quorum_group_ids, position=rule.position, shadow=rule.shadow,
    )


def rules_enabled(agent_id: int | None) -> list[RuleSpec]:
    """The enabled rules that can apply to a run of this agent, in shadow or not, in the order
    they are tried: the agent's project's rules only. One query."""
    rules = ApprovalRule.objects.filter(enabled=True)
    if agent_id is not None:
        rules = rules.filter(project_id__in=Agent.objects.filter(pk=agent_id).values("project_id"))
    rows = [r for r in rules.order_by("position", "pk") if r.agent_id is None or r.agent_id == agent_id]
    quorums = [r.pk for r in rows if r.action == ApprovalRule.Action.ASK_QUORUM]
    groups: dict[int, list[int]] = {}
    if quorums:  # a second query only when a quorum rule can apply
        rows_of_groups = RuleQuorumGroup.objects.filter(rule_id__in=quorums).order_by("group__name", "group_id")
        for rule_id, group_id in rows_of_groups.values_list("rule_id", "group_id"):
            groups.setdefault(rule_id, []).append(group_id)
    return [rule_spec(r, quorum_group_ids=tuple(groups.get(r.pk, ()))) for r in rows]


def rule_quorum_group_ids(rule: ApprovalRule) -> tuple[int, ...]:
    # A quorum's groups are in the order of their names everywhere (the queue, the e-mails, the
    # audit trail), whatever order they were chosen in.
    pending = getattr(rule, "pending_quorum_groups", None)  # chosen in an edit, not saved yet
    if pending is not None:
        return tuple(group.pk for group in sorted(pending, key=lambda group: (group.name, group.pk)))
    if rule.pk is None or rule.action != ApprovalRule.Action.ASK_QUORUM:
        return ()
    rows = RuleQuorumGroup.objects.filter(rule_id=rule.pk).order_by("group__name", "group_id")
    return tuple(rows.values_list("group_id", flat=True))


def first_match(rules: Iterable[RuleSpec], facts: CallFacts) -> RuleSpec | None:
    """The rule that decides this call: the first that matches, or None (ask one person)."""
    return next((rule for rule in rules if rule_matches(rule, facts)), None)


def rule_matches(rule: RuleSpec, facts: CallFacts) -> bool:
    if rule.agent_id is not None and rule.agent_id != facts.agent_id:
        return False
    if not fnmatch.fnmatchcase(facts.tool_name, rule.tool_pattern or "*"):
        return False
    if rule.customer and rule.customer != facts.customer:
        return False
    if rule.launcher_unresolved:
        return False
    if rule.launched_by_id is not None and rule.launched_by_id != facts.launched_by_id:
        return False
    return all(condition_holds(c, facts) for c in rule.conditions)


def condition_holds(condition: dict, facts: CallFacts) -> bool:
    op, expected = condition["op"], condition.get("value")
    found = value_at(facts.arguments, condition["path"])
    if op == "present":
        return found is not _MISSING
    if op == "absent":
        return found is _MISSING
    if op == "outside":
        return found is not _MISSING and from_outside(condition["path"], facts.outside_paths)
    if found is _MISSING:
        return False  # a condition on a value that is not there never holds (so never approves)
    if expected == RUN_CUSTOMER:
        if not (facts.customer or "").strip():
            return False  # no customer is nobody's customer: "" must not equal an empty argument
        expected = facts.customer
    if op == "eq":
        return _same(found, expected)
    if op == "ne":
        return not _same(found, expected)
    if op == "in":
        return any(_same(found, item) for item in expected)
    if op in ("lt", "gt"):
        number = _number(found)
        if number is None:
            return False
        return number < expected if op == "lt" else number > expected
    if op == "fullmatch":
        return isinstance(found, str) and _pattern(expected).fullmatch(found) is not None
    if op == "matches":
        return isinstance(found, str) and _pattern(expected).search(found) is not None
    return False


@functools.lru_cache(maxsize=256)
def _pattern(text: str):
    return re2.compile(text, _RE2_OPTIONS)


def _same(found: Any, expected: Any) -> bool:
    # 50 and 50.0 are the same amount; True is not 1.
    if isinstance(found, bool) or isinstance(expected, bool):
        return found is expected
    if isinstance(found, (int, float)) and isinstance(expected, (int, float)):
        return found == expected
    return type(found) is type(expected) and found == expected


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def value_at(data: Any, path: str) -> Any:
    """The value at a JSON path such as `$.refund.amount` or `$.items[0].sku`; _MISSING if absent."""
    current = data
    for key, index, quoted in _path_parts(path):
        if index is not None:
            if not isinstance(current, list) or index >= len(current):
                return _MISSING
            current = current[index]
        else:
            if not isinstance(current, dict) or key not in current:
                return _MISSING
            current = current[key]
    return current


def json_path(parts: Iterable[str | int]) -> str:
    """The canonical path of a value inside the arguments: ("items", 0, "sku") -> $.items[0].sku."""
    text = "$"
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][\w-]*", part):
            text += f".{part}"
        else:
            text += "[" + '"' + part.replace('"', "") + '"' + "]"
    return text


def canonical_path(path: str) -> str:
    return json_path(index if index is not None else key for key, index, _ in _path_parts(path))


def from_outside(path: str, outside_paths: Iterable[str]) -> bool:
    """True when the value at `path`, or a value inside it, came from outside content."""
    try:
        wanted = canonical_path(path)
    except ValueError:
        return False
    return any(p == wanted or p.startswith(wanted + ".") or p.startswith(wanted + "[") for p in outside_paths)


def _path_parts(path: str) -> list[tuple[str | None, int | None, None]]:
    text = path.strip()
    if not text.startswith("$"):
        text = "$." + text
    rest, parts = text[1:], []
    while rest:
        match = _PATH_PART.match(rest)
        if match is None:
            raise ValueError(f"not a JSON path: {path!r} (use $.name, $.list[0], $[\"odd key\"])")
        name, index, quoted = match.groups()
        parts.append((name if name is not None else quoted, int(index) if index is not None else None, None))
        rest = rest[match.end():]
    return parts


def conditions_errors(conditions: Any) -> list[str]:
    """What is wrong with a rule's conditions, in words for the editor; [] when they are usable."""
    if not isinstance(conditions, list):
        return ["Conditions must be a list."]
    if len(conditions) > MAX_CONDITIONS:
        return [f"At most {MAX_CONDITIONS} conditions."]
    errors = []
    for number, condition in enumerate(conditions, 1):
        where = f"Condition {number}"
        if not isinstance(condition, dict) or set(condition) - {"path", "op", "value"}:
            errors.append(f"{where}: an object with path, op and value.")
            continue
        path, op, value = condition.get("path"), condition.get("op"), condition.get("value")
        if not isinstance(path, str) or not path.strip():
            errors.append(f"{where}: a JSON path such as $.amount is needed.")
        else:
            try:
                _path_parts(path)
            except ValueError as exc:
                errors.append(f"{where}: {exc}.")
        if not isinstance(op, str) or op not in OPERATORS:
            errors.append(f"{where}: op must be one of {', '.join(OPERATORS)}.")
            continue
        if op in ("lt", "gt") and (isinstance(value, bool) or not isinstance(value, (int, float))):
            errors.append(f"{where}: {op} compares with a number.")
        elif op in ("lt", "gt") and not math.isfinite(value):
            errors.append(f"{where}: {op} compares with a finite number.")
        elif _holds_non_finite(value):
            errors.append(f"{where}: numbers must be finite (not NaN or Infinity).")
        elif op == "in" and not (isinstance(value, list) and value):
            errors.append(f"{where}: in needs a non-empty list of values.")
        elif op in PATTERN_OPERATORS:
            if not isinstance(value, str) or not value or len(value) > MAX_PATTERN_CHARS:
                errors.append(f"{where}: {op} needs an RE2 pattern of at most {MAX_PATTERN_CHARS} characters.")
            else:
                try:
                    _pattern(value)
                except re2.error as exc:
                    message = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
                    errors.append(f"{where}: not an RE2 pattern: {message}.")
        elif op in ("eq", "ne") and isinstance(value, (dict, list)):
            errors.append(f"{where}: {op} compares with a string, number, true, false or null.")
        elif op in NO_VALUE_OPERATORS and value is not None:
            errors.append(f"{where}: {op} takes no value.")
    return errors


def _holds_non_finite(value: Any) -> bool:
    values = value if isinstance(value, list) else [value]
    return any(isinstance(v, float) and not math.isfinite(v) for v in values)


def condition_warnings(conditions: Any) -> list[str]:
    """What a person should know before trusting the conditions: a searching pattern accepts any
    value with a match inside it. Words for the editor; the rule works as written."""
    return [
        f"Condition {number} searches: {c.get('path')} passes when any part of it matches {c.get('value')!r}, "
        "whatever surrounds that part. Choose \"matches, as a whole value\" to require the whole value."
        for number, c in enumerate(conditions if isinstance(conditions, list) else [], 1)
        if isinstance(c, dict) and c.get("op") == "matches"
    ]


def condition_text(condition: dict) -> str:
    """One condition in words: "$.amount is less than 50"."""
    op = condition.get("op")
    words = OPERATORS.get(op, str(op))
    if op in NO_VALUE_OPERATORS:
        return f"{condition.get('path')} {words}"
    return f"{condition.get('path')} {words} {condition.get('value')!r}"
