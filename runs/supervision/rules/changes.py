"""Creating, changing and deleting approval rules: every rule on a rule's fields, for the
dashboard and the API, and the audit trail of changes.

Each change bumps the rule's `version` and writes an ApprovalRuleVersion (a snapshot of every
field, who changed it) in the same transaction, so a decision that names "rule 'X' v3" can always
be traced to what v3 said, even after the rule was changed again or deleted.
"""
import copy

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction

from runs.engine.storage.text import check_storable_json, storable_text
from runs.models import ApprovalRule, ApprovalRuleVersion
from runs.supervision.approvals.quorum import MAX_APPROVALS
from runs.supervision.rules.conditions import conditions_errors, rule_quorum_group_ids

# Every field of a rule that a person chooses, in the editor's order.
RULE_FIELDS = (
    "name", "agent", "position", "enabled", "shadow", "tool_pattern", "conditions", "customer", "launched_by",
    "action", "group", "approvals_needed", "quorum_groups", "reason", "escalate_after_seconds", "expiry_warning_seconds",
)
DEFAULT_REJECT_REASON = "An approval rule does not allow this call."
SAFEGUARDS_TEXT = (
    "Automatic approval never applies to a call whose outcome is unknown after a crash, to a call whose "
    "arguments hold an identifier the run has never seen, or to a tool marked always ask."
)
_TEXT_FIELDS = ("name", "tool_pattern", "customer", "reason")
MAX_INT = 2**31 - 1  # what an integer column holds on every database (SQLite would not say)
_INT_RANGES = {"position": (-MAX_INT - 1, MAX_INT), "escalate_after_seconds": (1, MAX_INT),
               "expiry_warning_seconds": (1, MAX_INT), "approvals_needed": (2, MAX_APPROVALS)}


class InvalidRule(ValueError):
    """Fields a rule cannot have; `errors` holds the messages by field ("__all__" for none)."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items()))
        self.errors = errors


def rule_errors(*, rule: ApprovalRule | None, data: dict, project=None) -> dict[str, list[str]]:
    """What is wrong with `data` as the new fields of `rule` (None: a new rule, in `project`), by
    field; {} when nothing is. Fields left out of `data` keep the rule's values (a new rule's
    defaults)."""
    unknown = sorted(set(data) - set(RULE_FIELDS))
    if unknown:
        raise TypeError(f"not fields of a rule: {', '.join(unknown)}")
    errors: dict[str, list[str]] = {}
    project_id = rule.project_id if rule is not None else (project.pk if project is not None else None)
    agent = data.get("agent")
    if agent is not None and project_id is not None and agent.project_id != project_id:
        # A rule decides its own project's calls only: another team's agent is not its to cover.
        errors["agent"] = [f"{agent.name} is not an agent of this rule's project."]
    for name in _TEXT_FIELDS:
        value = data.get(name)
        if isinstance(value, str) and not storable_text(value):
            errors[name] = ["Text with a NUL or an unpaired surrogate character cannot be stored."]
    if "name" in data and not errors.get("name") and not str(data["name"] or "").strip():
        errors["name"] = ["A rule needs a name (the queue shows it with every decision it makes)."]
    if "tool_pattern" in data and not errors.get("tool_pattern") and not str(data["tool_pattern"] or "").strip():
        errors["tool_pattern"] = ["A tool name or a pattern such as refund_* or * (every tool) is needed."]
    for name, (low, high) in _INT_RANGES.items():
        value = data.get(name)
        if value is not None and not (isinstance(value, int) and low <= value <= high):
            errors[name] = [f"A whole number from {low} to {high}."]
    if "conditions" in data:
        messages = conditions_errors(data["conditions"])
        if not messages:
            try:
                check_storable_json(data["conditions"], "Conditions")
            except ValidationError as exc:
                messages = list(exc.messages)
        if messages:
            errors["conditions"] = messages
    candidate = copy.copy(rule) if rule is not None else ApprovalRule()
    rule_assign(candidate, {name: value for name, value in data.items() if name not in errors})
    if candidate.action == ApprovalRule.Action.ASK_GROUP and candidate.group_id is None and "group" not in errors:
        errors["group"] = ["'Ask a named group' needs the group whose members decide."]
    if candidate.action == ApprovalRule.Action.ASK_QUORUM:
        needed = candidate.approvals_needed
        if needed is None and "approvals_needed" not in errors:
            errors["approvals_needed"] = [f"'Ask several people' needs how many must approve (2 to {MAX_APPROVALS})."]
        groups = rule_quorum_group_ids(candidate)
        if needed is not None and len(groups) > needed and "quorum_groups" not in errors:
            errors["quorum_groups"] = [f"Each group gives one of the {needed} approvals from a different person: "
                                       f"at most {needed} groups."]
    try:
        candidate.full_clean(exclude=[*errors, "conditions", "project"])  # conditions: checked above, in words
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(name, []).extend(messages)
    return errors


def rule_snapshot(rule: ApprovalRule) -> dict:
    """Every field of the rule as plain data: what one version of it said."""
    return {
        "name": rule.name, "agent_id": rule.agent_id, "agent": rule.agent.name if rule.agent_id else None,
        "position": rule.position, "enabled": rule.enabled, "shadow": rule.shadow, "tool_pattern": rule.tool_pattern,
        "conditions": rule.conditions, "customer": rule.customer, "launched_by_id": rule.launched_by_id,
        "launched_by": rule.launched_by.get_username() if rule.launched_by_id else None,
        "launched_by_unresolved": rule.launched_by_unresolved,
        "action": rule.action, "group_id": rule.group_id, "group": rule.group.name if rule.group_id else None,
        "approvals_needed": rule.approvals_needed, **_quorum_snapshot(rule),
        "reason": rule.reason, "escalate_after_seconds": rule.escalate_after_seconds,
        "expiry_warning_seconds": rule.expiry_warning_seconds, "version": rule.version,
    }


def _quorum_snapshot(rule: ApprovalRule) -> dict:
    ids = list(rule_quorum_group_ids(rule))
    names = dict(Group.objects.filter(pk__in=ids).values_list("pk", "name")) if ids else {}
    return {"quorum_group_ids": ids, "quorum_groups": [names.get(pk, f"group #{pk}") for pk in ids]}


def _quorum_save(rule: ApprovalRule) -> None:
    """Write the quorum's groups an edit chose (after the rule's row exists)."""
    pending = getattr(rule, "pending_quorum_groups", None)
    if pending is not None:
        rule.quorum_groups.set(pending)
        del rule.pending_quorum_groups


def rule_create(*, data: dict, user, project=None, saved_over: list[dict] | None = None) -> ApprovalRule:
    """A new rule, in `project` (None: Default). `saved_over`: the calls people rejected that it
    would have approved, as its saver confirmed them (runs.supervision.rules.backtest), kept on its version."""
    errors = rule_errors(rule=None, data=data, project=project)
    if errors:
        raise InvalidRule(errors)
    rule = ApprovalRule(**({"project": project} if project is not None else {}))
    with transaction.atomic():
        rule_assign(rule, data)
        _normalize(rule)
        rule.version = 1
        rule.updated_by_name = _name(user)
        rule.save()
        _quorum_save(rule)
        _record(rule, ApprovalRuleVersion.Change.CREATED, user, saved_over=saved_over)
    return rule


def rule_update(*, rule: ApprovalRule, data: dict, user, saved_over: list[dict] | None = None) -> ApprovalRule:
    """Change the given fields; a save that changes nothing makes no new version. `saved_over`
    as for rule_create."""
    errors = rule_errors(rule=rule, data=data)
    if errors:
        raise InvalidRule(errors)
    with transaction.atomic():
        # Under the row lock: two admins saving at once get versions n+1 and n+2, never two n+1.
        current = ApprovalRule.objects.select_for_update().get(pk=rule.pk)
        before = rule_snapshot(current)
        rule_assign(current, data)
        _normalize(current)
        if rule_snapshot(current) == before:
            return current
        current.version += 1
        current.updated_by_name = _name(user)
        current.save()
        _quorum_save(current)
        _record(current, ApprovalRuleVersion.Change.UPDATED, user, saved_over=saved_over)
    return current


def rule_delete(*, rule: ApprovalRule, user) -> None:
    """Delete the rule; its versions stay (by rule_key), ending with a "deleted" one. Decisions it
    made keep its name and version (Approval.rule_name, rule_version)."""
    with transaction.atomic():
        current = ApprovalRule.objects.select_for_update().filter(pk=rule.pk).first()
        if current is None:
            return  # deleted meanwhile: the first deletion is in the trail
        current.version += 1
        _record(current, ApprovalRuleVersion.Change.DELETED, user)
        current.delete()


def _record(rule: ApprovalRule, change: str, user, *, saved_over: list[dict] | None = None) -> None:
    ApprovalRuleVersion.objects.create(
        rule=rule, rule_key=rule.pk, version=rule.version, change=change,
        snapshot=rule_snapshot(rule), changed_by_name=_name(user), saved_over=list(saved_over or ()),
    )


def _normalize(rule: ApprovalRule) -> None:
    rule.name = rule.name.strip()
    rule.tool_pattern = rule.tool_pattern.strip()
    rule.customer = rule.customer.strip()
    if rule.action != ApprovalRule.Action.ASK_GROUP:
        rule.group = None  # only "ask a named group" uses one; kept, it would read as if it mattered
    if rule.action != ApprovalRule.Action.ASK_QUORUM:
        rule.approvals_needed = None  # the same for a quorum's count and groups
        rule.pending_quorum_groups = []
    if rule.action == ApprovalRule.Action.REJECT and not rule.reason.strip():
        rule.reason = DEFAULT_REJECT_REASON  # the model is always told why


def rule_assign(rule: ApprovalRule, data: dict) -> None:
    """Set the given fields (nothing is saved). Choosing the launcher, an account or anyone (None),
    replaces a launcher name that matched no account; leaving it out keeps the rule matching nobody."""
    for name, value in data.items():
        if name == "quorum_groups":  # many-to-many: written once the rule is saved (_quorum_save)
            rule.pending_quorum_groups = list(value or ())
            continue
        setattr(rule, name, value)
    if "launched_by" in data:
        rule.launched_by_unresolved = ""


def _name(user) -> str:
    return user.get_username() if user is not None else ""
