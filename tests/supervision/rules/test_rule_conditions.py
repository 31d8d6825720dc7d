"""What a rule's conditions match, as plain data (runs.supervision.rules.conditions): values that only look
right, the run's customer when there is none, and the account that launched the run."""
import pytest

from runs.supervision.rules.conditions import CallFacts, RuleSpec, condition_text, conditions_errors, rule_matches


def rule(*conditions, **fields) -> RuleSpec:
    return RuleSpec(id=1, name="r", version=1, action="approve", conditions=tuple(conditions), **fields)


def facts(arguments, **fields) -> CallFacts:
    return CallFacts("send_invoice", arguments, agent_id=1, **fields)


# --- a pattern matches the whole value, or says it searches ---------------------------------------


@pytest.mark.parametrize("pattern, value, whole, contains", [
    (r"[^@]+@example\.com", "y@example.com", True, True),
    (r"[^@]+@example\.com", "x@evil.test,y@example.com", False, True),
    (r"SKU-\d+", "SKU-1", True, True),
    (r"SKU-\d+", "SKU-1; DROP everything", False, True),
    (r"SKU-\d+|ORD-\d+", "ORD-7 and more", False, True),  # an alternation is matched whole too
])
def test_fullmatch_needs_the_whole_value_and_matches_only_a_part(pattern, value, whole, contains):
    arguments = {"email": value}
    assert rule_matches(rule({"path": "$.email", "op": "fullmatch", "value": pattern}), facts(arguments)) is whole
    assert rule_matches(rule({"path": "$.email", "op": "matches", "value": pattern}), facts(arguments)) is contains


def test_the_two_pattern_conditions_say_which_they_are():
    assert condition_text({"path": "$.email", "op": "fullmatch", "value": "a"}) == (
        "$.email matches, as a whole value, the RE2 pattern 'a'")
    assert condition_text({"path": "$.email", "op": "matches", "value": "a"}) == (
        "$.email contains a match of the RE2 pattern 'a'")


def test_fullmatch_is_checked_like_matches():
    assert conditions_errors([{"path": "$.x", "op": "fullmatch", "value": "(unclosed"}])[0].startswith(
        "Condition 1: not an RE2 pattern")
    assert conditions_errors([{"path": "$.x", "op": "fullmatch", "value": ""}]) == [
        "Condition 1: fullmatch needs an RE2 pattern of at most 500 characters."]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_condition_on_a_number_that_is_not_finite_is_refused(value):
    assert conditions_errors([{"path": "$.amount", "op": "gt", "value": value}]) == [
        "Condition 1: gt compares with a finite number."]
    assert conditions_errors([{"path": "$.amount", "op": "in", "value": [1, value]}]) == [
        "Condition 1: numbers must be finite (not NaN or Infinity)."]


# --- $run.customer when the run has no customer ---------------------------------------------------


@pytest.mark.parametrize("op", ["eq", "ne", "matches", "fullmatch"])
@pytest.mark.parametrize("customer", ["", "  "])
def test_the_runs_customer_never_matches_when_the_run_has_none(op, customer):
    own = rule({"path": "$.customer", "op": op, "value": "$run.customer"})
    assert not rule_matches(own, facts({"customer": ""}, customer=customer))
    assert not rule_matches(own, facts({"customer": "acme"}, customer=customer))


def test_the_runs_customer_matches_its_own_customer():
    own = rule({"path": "$.customer", "op": "eq", "value": "$run.customer"})
    assert rule_matches(own, facts({"customer": "acme"}, customer="acme"))
    assert not rule_matches(own, facts({"customer": "globex"}, customer="acme"))


# --- who launched the run is an account -----------------------------------------------------------


def test_a_launcher_condition_matches_that_account_only():
    by_ada = rule(launched_by_id=7)
    assert rule_matches(by_ada, facts({}, launched_by_id=7))
    assert not rule_matches(by_ada, facts({}, launched_by_id=8))
    assert not rule_matches(by_ada, facts({}, launched_by_id=None))  # launched from the CLI or a schedule


def test_a_launcher_name_that_matched_no_account_matches_nobody():
    orphan = rule(launcher_unresolved="carol")
    assert not rule_matches(orphan, facts({}, launched_by_id=None))
    assert not rule_matches(orphan, facts({}, launched_by_id=3))
