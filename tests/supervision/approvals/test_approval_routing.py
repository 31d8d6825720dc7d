"""Where a destructive call goes, as the pure route function decides it (no database)."""
from runs.engine.tools.edit_note import EDIT_NOTE, operator_edit
from runs.supervision.approvals.gate import rejection_payload
from runs.supervision.rules.conditions import CallFacts, RuleSpec, first_match
from runs.supervision.rules.who_decides import (
    APPROVED,
    PENDING,
    REJECTED,
    GrantFacts,
    route_call,
)

HASH = "a" * 64


def rule(action="approve", *, name="small refunds", version=3, **fields) -> RuleSpec:
    return RuleSpec(id=7, name=name, version=version, action=action, **fields)


def route(**facts):
    return route_call(**{"tool_name": "cancel_order", "args_hash": HASH, "policy": "ask", "rule": None, **facts})


def test_no_rule_asks_one_person():
    r = route()
    assert (r.status, r.required_approvals, r.group_id, r.rule, r.automatic) == (PENDING, 1, None, None, False)


def test_an_approving_rule_approves_and_is_named():
    r = route(rule=rule())
    assert (r.status, r.automatic, r.rule.id, r.rule.version) == (APPROVED, True, 7, 3)
    assert r.reason == "automatic: rule 'small refunds' v3"


def test_a_rejecting_rule_rejects_with_its_reason():
    r = route(rule=rule("reject", reason="refunds over 500 go through finance"))
    assert (r.status, r.reason, r.rule.name) == (REJECTED, "refunds over 500 go through finance", "small refunds")


def test_the_first_matching_rule_wins():
    facts = CallFacts("cancel_order", {"amount": 20}, agent_id=1)
    rules = [
        rule("reject", name="never", tool_pattern="refund_*"),  # does not match the tool
        rule("ask_two", name="two for cancels", tool_pattern="cancel_*"),
        rule("approve", name="everything"),
    ]
    chosen = first_match(rules, facts)
    assert chosen.name == "two for cancels"
    assert route(rule=chosen).required_approvals == 2


def test_ask_two_and_ask_group_route_to_people():
    two = route(rule=rule("ask_two"))
    assert (two.status, two.required_approvals, two.rule.name) == (PENDING, 2, "small refunds")
    group = route(rule=rule("ask_group", group_id=5))
    assert (group.status, group.required_approvals, group.group_id) == (PENDING, 1, 5)


def test_a_critical_tool_needs_two_people_whatever_approves_it():
    r = route(rule=rule(), critical=True)
    assert (r.status, r.required_approvals) == (PENDING, 2)
    assert r.note == "Rule 'small refunds' v3 would approve, but cancel_order is critical, so two people must approve."
    assert route(critical=True, policy="approve").required_approvals == 2
    assert route(critical=True, grants=(GrantFacts(1, HASH),)).status == PENDING
    assert route(critical=True, rule=rule("reject")).status == REJECTED  # a rejection needs nobody


def test_an_unseen_identifier_stops_a_rule_and_the_note_says_why():
    r = route(rule=rule(), unseen_ids=("ORD-999",))
    assert (r.status, r.rule.version) == (PENDING, 3)
    assert r.note == "Rule 'small refunds' v3 would approve, but the arguments hold ORD-999, which this run has never seen."


def test_an_unseen_identifier_in_a_sensitive_field_stops_rules_tool_grants_and_the_policy_naming_the_field():
    r = route(rule=rule(), unseen_sensitive=("order_id",))
    assert r.status == PENDING
    assert r.note == ("Rule 'small refunds' v3 would approve, but the sensitive field order_id holds an identifier "
                      "this run has never seen.")
    assert route(grants=(GrantFacts(5, ""),), unseen_sensitive=("card",)).status == PENDING
    assert route(grants=(GrantFacts(3, HASH),), unseen_sensitive=("card",)).status == APPROVED  # a person read them
    both = route(policy="approve", unseen_ids=("ORD-9",), unseen_sensitive=("card", "iban"))
    assert both.note == ("The run's approve-all policy would approve, but the arguments hold ORD-9, which this run "
                         "has never seen; and the sensitive fields card and iban hold identifiers this run has never seen.")


def test_always_ask_stops_rules_grants_and_the_policy():
    for facts in ({"rule": rule()}, {"grants": (GrantFacts(1, HASH),)}, {"policy": "approve"}):
        r = route(always_ask=True, **facts)
        assert r.status == PENDING and "cancel_order is marked always ask" in r.note


def test_outcome_unknown_goes_to_one_person_whatever_else_says():
    for facts in ({"rule": rule()}, {"rule": rule("reject")}, {"policy": "reject"}, {"rule": rule("ask_two")},
                  {"policy": "approve", "critical": True}):
        r = route(outcome_unknown=True, **facts)
        assert (r.status, r.required_approvals, r.group_id) == (PENDING, 1, None)
    assert "the outcome of this call is unknown after a crash" in route(outcome_unknown=True, rule=rule()).note


def test_grants_identical_calls_and_whole_tools():
    identical = route(grants=(GrantFacts(4, "b" * 64), GrantFacts(3, HASH)))
    assert (identical.status, identical.grant_id, identical.rule) == (APPROVED, 3, None)
    assert route(grants=(GrantFacts(4, "b" * 64),)).status == PENDING  # another call's arguments
    assert route(grants=(GrantFacts(5, ""),)).grant_id == 5
    # Identical arguments were read by the person who granted them; a whole tool's were not.
    assert route(grants=(GrantFacts(3, HASH),), unseen_ids=("ORD-9",)).status == APPROVED
    assert route(grants=(GrantFacts(5, ""),), unseen_ids=("ORD-9",)).status == PENDING
    # A rule asking two people or a group is not overridden by a grant.
    assert route(rule=rule("ask_two"), grants=(GrantFacts(3, HASH),)).status == PENDING
    assert route(rule=rule("ask_group", group_id=2), grants=(GrantFacts(3, HASH),)).status == PENDING
    assert route(rule=rule("ask"), grants=(GrantFacts(3, HASH),)).grant_id == 3


def test_the_policies_and_their_safeguards():
    assert route(policy="reject", rule=rule()).status == REJECTED
    assert route(policy="approve").reason == "automatic: approve-all policy of this run"
    held = route(policy="approve", unseen_ids=("ORD-9", "ORD-8"))
    assert held.status == PENDING
    assert held.note == ("The run's approve-all policy would approve, but the arguments hold ORD-9 and ORD-8, "
                         "which this run has never seen.")
    assert route(policy="approve", rule=rule("ask_two")).status == PENDING


class _Approval:
    def __init__(self, **fields):
        self.automatic, self.rule_name, self.rule_version, self.guidance = False, "", None, ""
        self.__dict__.update(fields)


def test_what_the_model_reads_of_a_rejection():
    by_rule = rejection_payload(_Approval(automatic=True, rule_name="no big refunds", rule_version=2), "over 500")
    assert by_rule == {"ok": False, "error": "rejected by rule 'no big refunds' v2: over 500"}
    with_guidance = rejection_payload(_Approval(guidance="use ORD-1003 instead"), "wrong order")
    assert with_guidance == {"ok": False, "error": "rejected by operator: wrong order", "guidance": "use ORD-1003 instead"}


def test_an_operator_edit_lists_each_change_and_masks_sensitive_fields():
    edit = operator_edit(
        {"order_id": "ORD-1001", "reason": "asked", "card": "4111", "note": "x", "items": [1, 2]},
        {"order_id": "ORD-1003", "reason": "asked", "card": "4242", "items": [1], "odd key": 1},
        sensitive_fields=["card"],
    )
    assert edit == {"note": EDIT_NOTE, "changed": {
        "$.order_id": {"from": "ORD-1001", "to": "ORD-1003"},
        "$.card": {"from": "••••", "to": "••••"},
        "$.note": {"from": "x"},
        "$.items": {"from": [1, 2], "to": [1]},
        '$["odd key"]': {"to": 1},
    }}
    assert operator_edit({"n": 1}, {"n": True})["changed"] == {"$.n": {"from": 1, "to": True}}


def test_only_whole_identifiers_in_a_tool_result_count_as_shown():
    from runs.supervision.evidence.provenance import result_identifiers

    text = '{"ok": true, "result": {"id": 12, "order_id": "ORD-1003", "body": "cancel ORD-2001", "ref": "INV-77"}}'
    assert result_identifiers(text).split("\n") == ["12", "ORD-1003", "INV-77"]
    assert result_identifiers('{"ok": true, "truncated": true, "preview": "ORD-9"}') == '{"ok": true, "truncated": true, "preview": "ORD-9"}'
