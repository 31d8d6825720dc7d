"""A rule changed while the loop is deciding calls: every decision is one version's, whole.

One thread (its own database connection) saves a rule again and again through `rule_update`,
flipping its action between approve and reject and moving its conditions, its name, its reason
and whether it is enabled, so each version says something different and the audit trail's
snapshots tell which. Meanwhile another thread drives real runs (scripted model over HTTP, the
real loop) whose steps each make several cancel_order calls. Each decision must then name a
version (rule, number, name) whose snapshot was enabled, matched the call and gives that very
outcome, and the model must read that version's reason: never the outcome of one version with
another's number or words; and once a save has returned, no call is decided by an older version.
A second test deletes rules while calls are decided: no run may fail for it.

On PostgreSQL (READ COMMITTED) a save can commit between any two statements of the loop's
transaction, until the loop holds the rule that decided a call (route_facts._rule_held); on
SQLite the loop's write transaction holds the database's write lock, so saves land only between
steps, and the test shows the same guarantees with fewer interleavings.
"""
import json
import threading
import time

import pytest

from runs.models import Approval, ApprovalRuleVersion, Run, ToolCall
from runs.supervision.rules.changes import rule_create, rule_delete, rule_update
from runs.supervision.rules.conditions import CallFacts, RuleSpec, rule_matches
from tests.engine.loop_contract.support import call, calls
from tests.support.approval_fixtures import make_user
from tests.support.threads import together
from tests.support.timeline_replay import mismatches

ROUNDS = 3
RUNS_PER_ROUND = 4
CALLS_PER_STEP = 8
TASK = "Cancel order ORD-1001"  # the order id is in the task: seen, so no safeguard holds a call back
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def distinct_calls(demo_data):
    """Each call cancels with a reason of its own: here distinct calls, not twins on one order (a
    twin that ran would hold the next for a person: tests/supervision/evidence/twins is about that)."""
    from toolsapp.models import Tool

    Tool.objects.filter(name="cancel_order").update(identifier_fields=["order_id", "reason"])


def rule_state(change: int) -> dict:
    """The fields of the rule's `change`th save: every save flips the action; the conditions move
    between calls marked "a-" and "b-" every second save; every third save disables the rule."""
    marker = "a" if (change // 2) % 2 == 0 else "b"
    return {
        "name": f"cancels, change {change}",
        "action": "approve" if change % 2 == 0 else "reject",
        "conditions": [{"path": "$.reason", "op": "matches", "value": f"^{marker}-"}],
        "enabled": change % 3 != 2,
        "reason": f"reason of change {change}",
    }


def keep_changing(rule, admin, stop: threading.Event, saved: list) -> None:
    """Save the rule until `stop` is set; `saved` gets, as each save returns, its version and how
    many decisions named an older one by then."""
    change = 1
    while not stop.is_set():
        version = rule_update(rule=rule, data=rule_state(change), user=admin).version
        saved.append((version, Approval.objects.filter(rule_id=rule.pk, rule_version__lt=version).count()))
        change += 1


def cancels(round_number: int, run_number: int) -> dict:
    """One step of cancel_order calls, their reasons alternately marked "a-" and "b-" (distinct
    arguments, so the repeat guard never stops the run)."""
    return calls(*(
        call("cancel_order", {"order_id": "ORD-1001", "reason": f"{'ab'[k % 2]}-{round_number}-{run_number}-{k}"},
             f"c{k}")
        for k in range(CALLS_PER_STEP)
    ))


def saved_count() -> int:
    return ApprovalRuleVersion.objects.count()


def progress_before(count: int, *, deadline: float) -> None:
    """Wait (bounded) until another rule version than the `count` so far is saved."""
    while saved_count() <= count and time.monotonic() < deadline:
        time.sleep(0.005)


def decide_while(launch, script, change_rules) -> list[int]:
    """Drive runs of cancel_order calls while `change_rules(stop)` changes rules in another
    thread until `stop` is set, for several rounds; the runs' ids."""
    run_ids: list[int] = []
    for round_number in range(ROUNDS):
        stop = threading.Event()

        def evaluate(round_number=round_number, stop=stop):
            try:
                for run_number in range(RUNS_PER_ROUND):
                    # Each run starts after at least one more save than the last, so the runs meet
                    # several versions even when a busy machine starves the saving thread.
                    progress_before(saved_count(), deadline=time.monotonic() + 10)
                    model = script(cancels(round_number, run_number), {"content": "Done."})
                    run_ids.append(launch(TASK, models=[model]).pk)
            finally:
                stop.set()

        outcomes = together(evaluate, lambda stop=stop: change_rules(stop), timeout=300)  # each returns None
        assert outcomes == [None, None], outcomes
    return run_ids


def ended_badly(run_ids: list[int]) -> list[tuple]:
    """The runs that neither finished nor wait for a person (a failed step ends a run)."""
    return [(r.pk, r.status, r.stop_detail) for r in Run.objects.filter(pk__in=run_ids)
            if r.status not in (Run.Status.SUCCEEDED, Run.Status.AWAITING_APPROVAL)]


def version_spec(rule_id: int | None, version: ApprovalRuleVersion) -> RuleSpec:
    snap = version.snapshot
    return RuleSpec(
        id=rule_id, name=snap["name"], version=version.version, action=snap["action"], agent_id=snap["agent_id"],
        tool_pattern=snap["tool_pattern"], conditions=tuple(snap["conditions"]), customer=snap["customer"],
        launched_by_id=snap["launched_by_id"], launcher_unresolved=snap["launched_by_unresolved"], reason=snap["reason"],
    )


def decision_problems(approval: Approval, versions: dict[int, ApprovalRuleVersion], rule_id: int | None) -> list[str]:
    """What is wrong with one call's decision, given every version of the rule (`rule_id` None:
    the rule was deleted since, its decisions keep its name and version); [] when nothing."""
    call_row: ToolCall = approval.tool_call
    where = f"call {call_row.call_id} of run {approval.run_id}"
    facts = CallFacts(call_row.tool_name, json.loads(call_row.arguments), approval.run.agent_id)
    if not approval.rule_name:
        # No rule decided: the rule as some version said did not apply (disabled, or not matching).
        if approval.status != Approval.Status.PENDING or approval.automatic:
            return [f"{where}: {approval.status} (automatic={approval.automatic}) without a rule"]
        if approval.rule_version is not None or approval.rule_id is not None:
            return [f"{where}: rule {approval.rule_id} v{approval.rule_version} without a rule name"]
        if not any(not v.snapshot["enabled"] or not rule_matches(version_spec(rule_id, v), facts)
                   for v in versions.values()):
            return [f"{where}: waits for a person, but every version of the rule was enabled and matched it"]
        return [] if call_row.status == ToolCall.Status.AWAITING_APPROVAL else [f"{where}: call is {call_row.status}"]
    version = versions.get(approval.rule_version)
    if approval.rule_id != rule_id or version is None:
        return [f"{where}: names rule {approval.rule_id} v{approval.rule_version}, not a version in the trail"]
    snap, problems = version.snapshot, []
    if not snap["enabled"]:
        problems.append(f"{where}: decided by v{version.version}, which was disabled")
    if not rule_matches(version_spec(rule_id, version), facts):
        problems.append(f"{where}: decided by v{version.version}, whose conditions {snap['conditions']} do not match")
    if approval.rule_name != snap["name"]:
        problems.append(f"{where}: v{version.version} is named {snap['name']!r}, the decision says {approval.rule_name!r}")
    expected = {"approve": Approval.Status.APPROVED, "reject": Approval.Status.REJECTED}[snap["action"]]
    if (approval.status, approval.automatic) != (expected, True):
        problems.append(f"{where}: v{version.version} says {snap['action']}, the decision is {approval.status}")
    if approval.status == Approval.Status.REJECTED:
        told = f"rejected by rule {snap['name']!r} v{version.version}: {snap['reason']}"
        if (call_row.status, call_row.error) != (ToolCall.Status.REJECTED, told):
            problems.append(f"{where}: the model read {call_row.error!r} ({call_row.status}), not {told!r}")
    elif approval.status == Approval.Status.APPROVED:
        if call_row.status not in (ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED):
            problems.append(f"{where}: approved but the call is {call_row.status}")
        if approval.reason != f"automatic: rule {snap['name']!r} v{version.version}":
            problems.append(f"{where}: approved by v{version.version} with the reason {approval.reason!r}")
    return problems


def test_a_rule_saved_while_calls_are_decided_gives_each_call_one_whole_version(launch, script):
    admin = make_user("ada", "admins")
    rule = rule_create(data={"tool_pattern": "cancel_order", **rule_state(0)}, user=admin)
    saved: list[tuple[int, int]] = []
    run_ids = decide_while(launch, script, lambda stop: keep_changing(rule, admin, stop, saved))

    versions = {v.version: v for v in ApprovalRuleVersion.objects.filter(rule_key=rule.pk)}
    assert sorted(versions) == list(range(1, 2 + len(saved)))  # every save made exactly one version
    cancel_calls = ToolCall.objects.filter(run_id__in=run_ids, tool_name="cancel_order").select_related("approval")
    assert cancel_calls.count() == len(run_ids) * CALLS_PER_STEP
    undecided = [f"call {c.call_id} of run {c.run_id}" for c in cancel_calls if c.approval is None]
    assert undecided == []  # every call was decided or routed to a person
    approvals = Approval.objects.filter(run_id__in=run_ids).select_related("tool_call", "run")
    assert approvals.count() == len(run_ids) * CALLS_PER_STEP  # asked once each
    problems = [p for approval in approvals for p in decision_problems(approval, versions, rule.pk)]
    assert problems == []
    assert [p for run_id in run_ids for p in mismatches(run_id)] == []  # the timeline tells the same
    # Once a save returned, no call was decided by a version it replaced (an admin who turns a
    # rule off is not followed by calls it approves).
    older = {version: Approval.objects.filter(rule_id=rule.pk, rule_version__lt=version).count() for version, _ in saved}
    assert [(version, count, older[version]) for version, count in saved if older[version] != count] == []
    # The race was real: the rule decided calls under several versions.
    decided = {(a.rule_version, a.status) for a in approvals if a.rule_id is not None}
    assert len(decided) > 2, decided
    assert ended_badly(run_ids) == []


def keep_replacing(admin, stop: threading.Event, made: list) -> None:
    """Create a rule and delete it again until `stop` is set, approving and rejecting in turn."""
    while not stop.is_set():
        number = len(made)
        action = "approve" if number % 2 == 0 else "reject"
        rule = rule_create(data={"name": f"short-lived {number}", "tool_pattern": "cancel_order", "action": action,
                                 "reason": f"reason of rule {number}"}, user=admin)
        made.append(rule.pk)
        time.sleep(0.005)  # a rule in force about half the time: calls meet it and miss it
        rule_delete(rule=rule, user=admin)
        time.sleep(0.005)


def test_a_rule_deleted_while_calls_are_decided_fails_no_run_and_its_decisions_stay_whole(launch, script):
    # Before the fix, on PostgreSQL: the approval naming the rule failed its foreign key at the
    # loop's commit, and the run ended with an internal error.
    admin = make_user("ada", "admins")
    made: list[int] = []
    run_ids = decide_while(launch, script, lambda stop: keep_replacing(admin, stop, made))

    assert ended_badly(run_ids) == []
    approvals = Approval.objects.filter(run_id__in=run_ids).select_related("tool_call", "run")
    assert approvals.count() == len(run_ids) * CALLS_PER_STEP  # every call decided or routed, once
    by_name = {v.snapshot["name"]: v for v in ApprovalRuleVersion.objects.filter(change="created")}
    problems = []
    for approval in approvals.exclude(rule_name=""):
        # The rule is gone (its decisions keep name and version): find its version by its name.
        version = by_name.get(approval.rule_name)
        if version is None or approval.rule_version != version.version:
            problems.append(f"approval {approval.pk}: {approval.rule_name!r} v{approval.rule_version} is not in the trail")
            continue
        problems += decision_problems(approval, {version.version: version}, None)
    assert problems == []
    assert [p for run_id in run_ids for p in mismatches(run_id)] == []
    assert approvals.exclude(rule_name="").exists() and approvals.filter(rule_name="").exists()
