"""Reads for the rule pages and the API: the rules in the order they are tried, and the audit
trail of their changes (what each version changed, in words)."""
import functools
import operator
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models import Q

from runs.models import Agent, ApprovalRule, ApprovalRuleVersion
from runs.supervision.rules.conditions import condition_text

HISTORY_LIMIT = 50
_FIELD_NAMES = {
    "agent": "agent", "position": "position", "enabled": "enabled", "shadow": "shadow", "tool_pattern": "tool",
    "conditions": "conditions", "customer": "customer", "launched_by_id": "launched by",
    "launched_by_unresolved": "launched by", "action": "action",
    "group": "group", "approvals_needed": "quorum", "quorum_group_ids": "quorum", "reason": "reason", "escalate_after_seconds": "escalation",
    "expiry_warning_seconds": "expiry warning", "name": "name",
}


@dataclass
class RuleChange:
    version: ApprovalRuleVersion
    changed: list[str]  # the fields this version changed (empty for a creation or a deletion)
    launcher: str = ""  # who the version's launcher condition names: the account's current username


def rule_list(*, agent: Agent | None = None, projects: set[int] | None = None) -> list[ApprovalRule]:
    """Every rule in the order they are tried (global and per agent); with `agent`, those that can
    apply to its runs; with `projects`, those of these projects."""
    rules = (ApprovalRule.objects.select_related("agent", "group", "launched_by", "project")
             .prefetch_related("quorum_groups").order_by("position", "pk"))
    if agent is not None:
        rules = rules.filter(Q(agent=None) | Q(agent=agent), project_id=agent.project_id)
    if projects is not None:
        rules = rules.filter(project_id__in=projects)
    return list(rules)


def rule_conditions_text(rule: ApprovalRule) -> list[str]:
    return [condition_text(c) for c in rule.conditions or ()]


def rule_history(*, rule_key: int | None = None, limit: int = HISTORY_LIMIT,
                 projects: set[int] | None = None) -> list[RuleChange]:
    """The newest changes of rules (of one rule with `rule_key`), each with what it changed from the
    version before it, and its launcher by the account's current username. Three queries at most.
    With `projects`, the changes of these projects' rules (a deleted rule's are no longer told)."""
    versions = ApprovalRuleVersion.objects.order_by("-changed_at", "-pk")
    if projects is not None:
        versions = versions.filter(rule_key__in=ApprovalRule.objects.filter(project_id__in=projects).values("pk"))
    if rule_key is not None:
        versions = versions.filter(rule_key=rule_key)
    versions = list(versions[:limit])
    # Versions are numbered one after the other: each change's "before" is the version under it.
    wanted = [Q(rule_key=v.rule_key, version=v.version - 1) for v in versions
              if v.change == ApprovalRuleVersion.Change.UPDATED]
    before = {}
    if wanted:
        rows = ApprovalRuleVersion.objects.filter(functools.reduce(operator.or_, wanted)).only(
            "rule_key", "version", "snapshot"
        )
        before = {(row.rule_key, row.version): row.snapshot for row in rows}
    account_ids = {v.snapshot.get("launched_by_id") for v in versions} - {None}
    usernames = dict(get_user_model().objects.filter(pk__in=account_ids).values_list("pk", "username")) if account_ids else {}
    changes = []
    for v in versions:
        earlier = before.get((v.rule_key, v.version - 1))
        changes.append(RuleChange(v, _changed_fields(earlier, v.snapshot) if earlier is not None else [],
                                  _launcher(v.snapshot, usernames)))
    return changes


def _launcher(snapshot: dict, usernames: dict[int, str]) -> str:
    if snapshot.get("launched_by_unresolved"):
        return f"nobody ({snapshot['launched_by_unresolved']} matched no account)"
    account = snapshot.get("launched_by_id")
    if account is None:
        return ""
    return usernames.get(account, f"account #{account}, since deleted")


# Fields added after versions were first recorded: what a snapshot without them meant.
_SNAPSHOT_DEFAULTS = {"shadow": False, "expiry_warning_seconds": None, "approvals_needed": None,
                      "quorum_group_ids": []}


def _changed_fields(before: dict, after: dict) -> list[str]:
    names = []
    for key, label in _FIELD_NAMES.items():
        default = _SNAPSHOT_DEFAULTS.get(key)
        if before.get(key, default) != after.get(key, default) and label not in names:
            names.append(label)
    return names
