"""Writing approval rules: every change is a new version with a snapshot in the audit trail, in
words when the rule cannot be saved, and deleting a rule keeps its history."""
import threading

import pytest
from django.contrib.auth.models import Group
from django.db import connection

from runs.models import Agent, ApprovalRule, ApprovalRuleVersion
from runs.supervision.rules.changes import (
    DEFAULT_REJECT_REASON,
    InvalidRule,
    rule_create,
    rule_delete,
    rule_errors,
    rule_update,
)
from runs.supervision.rules.history import rule_history
from tests.support.approval_fixtures import make_user

REFUNDS = {
    "name": "small cancellations", "tool_pattern": "cancel_*", "action": "approve",
    "conditions": [{"path": "$.order_id", "op": "matches", "value": "^ORD-"}],
}


@pytest.fixture
def ada(demo_data):
    return make_user("ada", "admins")


def test_creating_a_rule_makes_version_one_with_its_snapshot_and_author(ada):
    rule = rule_create(data={**REFUNDS, "agent": Agent.objects.get(name="demo")}, user=ada)

    assert (rule.version, rule.updated_by_name) == (1, "ada")
    [version] = ApprovalRuleVersion.objects.filter(rule_key=rule.pk)
    assert (version.version, version.change, version.changed_by_name) == (1, "created", "ada")
    assert version.snapshot["agent"] == "demo"
    assert version.snapshot["conditions"] == REFUNDS["conditions"]
    assert version.snapshot["action"] == "approve"


def test_each_change_bumps_the_version_and_a_save_without_change_does_not(ada):
    rule = rule_create(data=REFUNDS, user=ada)
    bob = make_user("bob-admin", "admins")

    rule = rule_update(rule=rule, data={"action": "ask_two", "position": 5}, user=bob)
    assert (rule.version, rule.updated_by_name) == (2, "bob-admin")
    rule = rule_update(rule=rule, data={"action": "ask_two", "position": 5}, user=ada)
    assert rule.version == 2  # nothing changed: no new version

    versions = list(ApprovalRuleVersion.objects.filter(rule_key=rule.pk).order_by("version"))
    assert [(v.version, v.change, v.changed_by_name) for v in versions] == [(1, "created", "ada"), (2, "updated", "bob-admin")]
    assert versions[0].snapshot["action"] == "approve" and versions[1].snapshot["action"] == "ask_two"
    [newest, first] = rule_history(rule_key=rule.pk)
    assert newest.changed == ["position", "action"]
    assert first.changed == []


def test_conditions_that_cannot_work_are_refused_in_words(ada):
    data = {**REFUNDS, "conditions": [{"path": "$.amount", "op": "lt", "value": "fifty"}, {"path": "amount", "op": "about"}]}

    with pytest.raises(InvalidRule) as refused:
        rule_create(data=data, user=ada)

    assert refused.value.errors["conditions"] == [
        "Condition 1: lt compares with a number.",
        "Condition 2: op must be one of eq, ne, lt, gt, in, fullmatch, matches, present, absent, outside.",
    ]
    assert not ApprovalRule.objects.exists() and not ApprovalRuleVersion.objects.exists()


def test_a_rule_needs_a_tool_pattern_a_name_and_for_a_group_the_group(ada):
    errors = rule_errors(rule=None, data={"name": " ", "tool_pattern": "  ", "action": "ask_group", "group": None})

    assert errors["tool_pattern"] == ["A tool name or a pattern such as refund_* or * (every tool) is needed."]
    assert errors["name"] == ["A rule needs a name (the queue shows it with every decision it makes)."]
    assert errors["group"] == ["'Ask a named group' needs the group whose members decide."]

    group = Group.objects.get(name="operators")
    rule = rule_create(data={"name": "ops decide", "action": "ask_group", "group": group}, user=ada)
    assert rule.group == group
    rule = rule_update(rule=rule, data={"action": "ask"}, user=ada)
    assert rule.group is None  # only ask_group uses a group


def test_a_reject_rule_without_a_reason_tells_the_model_a_default_one(ada):
    rule = rule_create(data={"name": "no cancellations", "tool_pattern": "cancel_order", "action": "reject"}, user=ada)

    assert rule.reason == DEFAULT_REJECT_REASON
    assert rule.versions.get().snapshot["reason"] == DEFAULT_REJECT_REASON


def test_deleting_a_rule_keeps_every_version_and_records_the_deletion(ada):
    rule = rule_create(data=REFUNDS, user=ada)
    rule = rule_update(rule=rule, data={"enabled": False}, user=ada)
    key = rule.pk

    rule_delete(rule=rule, user=ada)
    rule_delete(rule=rule, user=ada)  # twice: the first deletion is the one recorded

    assert not ApprovalRule.objects.filter(pk=key).exists()
    versions = list(ApprovalRuleVersion.objects.filter(rule_key=key).order_by("version"))
    assert [(v.version, v.change) for v in versions] == [(1, "created"), (2, "updated"), (3, "deleted")]
    assert all(v.rule_id is None for v in versions)
    assert versions[-1].snapshot["name"] == "small cancellations" and versions[-1].changed_by_name == "ada"


def test_numbers_a_column_cannot_hold_are_refused_before_the_database(ada):
    errors = rule_errors(rule=None, data={"name": "x", "position": 10**20, "escalate_after_seconds": 0})

    assert errors["position"] == ["A whole number from -2147483648 to 2147483647."]
    assert errors["escalate_after_seconds"] == ["A whole number from 1 to 2147483647."]


ROUNDS = 10  # each round two saves meet at a barrier; without the row lock most rounds collide


def save_together(rule, saves) -> list[Exception]:
    """rule_update for each (user, data) at once, each thread with its own connection and the
    same stale copy of the rule; returns what they raised."""
    barrier, failures = threading.Barrier(len(saves)), []

    def save(user, data):
        try:
            barrier.wait(timeout=10)
            rule_update(rule=rule, data=data, user=user)
        except Exception as exc:  # noqa: BLE001 (reported by the caller's assertion)
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=pair) for pair in saves]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a save hung"
    return failures


@pytest.mark.django_db(transaction=True)
def test_two_admins_saving_the_same_rule_at_once_make_two_versions_and_lose_neither_change(ada):
    rule = rule_create(data=REFUNDS, user=ada)
    bea = make_user("bea", "admins")

    for n in range(1, ROUNDS + 1):
        failures = save_together(rule, [(ada, {"position": n}), (bea, {"reason": f"round {n}"})])

        assert not failures
        rule.refresh_from_db()
        assert (rule.version, rule.position, rule.reason) == (1 + 2 * n, n, f"round {n}")
    versions = ApprovalRuleVersion.objects.filter(rule_key=rule.pk).order_by("version")
    assert [v.version for v in versions] == list(range(1, 2 + 2 * ROUNDS))


def test_the_audit_trail_names_the_launcher_by_the_accounts_current_username(ada):
    bob = make_user("bob", "operators")
    rule = rule_create(data={**REFUNDS, "launched_by": bob}, user=ada)
    rule_update(rule=rule, data={"launched_by": ada}, user=ada)
    bob.username = "robert"
    bob.save()

    [second, first] = rule_history(rule_key=rule.pk)
    assert (first.launcher, second.launcher, second.changed) == ("robert", "ada", ["launched by"])
    assert first.version.snapshot["launched_by_id"] == bob.pk
    assert first.version.snapshot["launched_by"] == "bob"  # who it was when saved


def test_the_account_a_rule_targets_cannot_be_deleted_so_the_rule_never_widens_to_anyone(ada):
    from django.contrib.auth.models import User
    from django.db.models import ProtectedError
    bob = make_user("bob", "operators")
    rule = rule_create(data={**REFUNDS, "launched_by": bob}, user=ada)

    with pytest.raises(ProtectedError):
        User.objects.filter(pk=bob.pk).delete()
    rule.refresh_from_db()
    assert rule.launched_by_id == bob.pk
