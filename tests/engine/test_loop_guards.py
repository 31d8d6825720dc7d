"""Fast unit tests of the loop's pure decisions (runs.engine.guards): no database, no HTTP."""
import json

import pytest

from runs.engine import guards
from runs.engine.guards import PlannedCall
from runs.models import Run

KEY = "test-hash-key"

BASE_CONFIG = {
    "max_iterations": 10,
    "repeat_limit": 3,
    "max_tokens": 1000,
    "max_wall_seconds": 60.0,
    "max_cost_usd": 1.0,
    "first_tool_choice": "required",
    "later_tool_choice": "auto",
}


def planned(name, raw, index=0, call_id=None):
    return PlannedCall(
        index=index, call_id=call_id or f"call_{index}", tool_name=name, arguments=raw, args_hash=guards.args_hash(raw, KEY)
    )


# --- limits ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1, 2, 10, 2**53 - 1])
def test_positive_int_limit_accepts_real_positive_integers(value):
    assert guards.check_positive_int("max_iterations", value) == value


@pytest.mark.parametrize(
    "value",
    [0, -1, -(2**60), 2.5, 3.0, "3", None, True, False, 2**53, 2**64, float("nan"), [3]],
    ids=lambda v: repr(v),
)
def test_positive_int_limit_rejects_everything_else(value):
    with pytest.raises(guards.InvalidLimit) as info:
        guards.check_positive_int("max_iterations", value)
    assert "max_iterations" in str(info.value)


@pytest.mark.parametrize("value,expected", [(0.001, 0.001), (3, 3.0), (600.0, 600.0)])
def test_positive_number_limit_accepts_positive_finite_numbers(value, expected):
    assert guards.check_positive_number("max_wall_seconds", value) == expected


@pytest.mark.parametrize(
    "value", [0, 0.0, -0.5, float("nan"), float("inf"), -float("inf"), True, "1", None], ids=lambda v: repr(v)
)
def test_positive_number_limit_rejects_zero_negative_nan_inf_bool_and_text(value):
    with pytest.raises(guards.InvalidLimit):
        guards.check_positive_number("max_cost_usd", value)


@pytest.mark.parametrize(
    "name,value",
    [("max_iterations", 0), ("repeat_limit", 0), ("max_tokens", 1.5), ("max_wall_seconds", 0), ("max_cost_usd", -1)],
)
def test_check_limits_names_the_bad_limit(name, value):
    with pytest.raises(guards.InvalidLimit, match=name):
        guards.check_limits({**BASE_CONFIG, name: value})


def test_check_limits_returns_a_valid_config_unchanged():
    assert guards.check_limits(dict(BASE_CONFIG)) == BASE_CONFIG


# --- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["", "   ", None])
def test_empty_arguments_mean_no_arguments(raw):
    assert guards.parse_arguments(raw) == ({}, None)


def test_object_arguments_are_parsed():
    assert guards.parse_arguments('{"city": "Lagos", "days": 2}') == ({"city": "Lagos", "days": 2}, None)


@pytest.mark.parametrize("raw", ["{not json", '{"city": "Lagos"', "city=Lagos"])
def test_arguments_that_are_not_json_are_an_error(raw):
    value, error = guards.parse_arguments(raw)
    assert value is None
    assert "not valid JSON" in error


@pytest.mark.parametrize("raw,kind", [("[1, 2]", "list"), ('"Lagos"', "str"), ("42", "int"), ("null", "NoneType")])
def test_arguments_that_are_json_but_not_an_object_are_an_error(raw, kind):
    value, error = guards.parse_arguments(raw)
    assert value is None
    assert "must be a JSON object" in error and kind in error


@pytest.mark.parametrize("raw", ['{"amount": NaN}', '{"amount": Infinity}', '{"a": {"b": [-Infinity]}}', '{"amount": 1e999}'])
def test_arguments_with_a_number_that_is_not_finite_are_an_error(raw):
    # Python's json reads NaN, Infinity and 1e999 (as inf); no schema bound or rule compares them.
    value, error = guards.parse_arguments(raw)
    assert value is None
    assert error == "arguments hold a number that is not finite (NaN, Infinity or too large); send a finite number"


def test_reformatted_arguments_have_the_same_canonical_form_and_hash():
    variants = ['{"city":"Lagos","days":2}', '{ "city" : "Lagos" , "days" : 2 }', '{"days": 2,\n "city": "Lagos"}']
    assert len({guards.canonical_arguments(v) for v in variants}) == 1
    assert len({guards.args_hash(v, KEY) for v in variants}) == 1


def test_unicode_escapes_and_literal_characters_hash_the_same():
    assert guards.args_hash('{"city":"Z\\u00fcrich"}', KEY) == guards.args_hash('{"city": "Zürich"}', KEY)


def test_different_arguments_have_different_hashes():
    assert guards.args_hash('{"city":"Lagos"}', KEY) != guards.args_hash('{"city":"London"}', KEY)
    assert guards.args_hash('{"n":1}', KEY) != guards.args_hash('{"n":"1"}', KEY)


def test_args_hash_depends_on_the_secret_key():
    assert guards.args_hash('{"city":"Lagos"}', "key-one") != guards.args_hash('{"city":"Lagos"}', "key-two")


def test_args_hash_does_not_reveal_the_arguments():
    digest = guards.args_hash('{"password":"hunter2"}', KEY)
    assert len(digest) == 64 and "hunter2" not in digest


def test_invalid_json_arguments_still_get_a_stable_hash():
    assert guards.canonical_arguments("{not json") == "{not json"
    assert guards.args_hash("{not json", KEY) == guards.args_hash("{not json", KEY)
    assert guards.args_hash("{not json", KEY) != guards.args_hash("{not  json", KEY)


# --- idempotency keys ----------------------------------------------------------------------------


def test_idempotency_key_is_stable_for_the_same_call_of_a_run():
    assert guards.idempotency_key(7, 2, 1) == guards.idempotency_key(7, 2, 1)


def test_idempotency_key_differs_across_runs_steps_and_call_positions():
    keys = {
        guards.idempotency_key(7, 1, 1),
        guards.idempotency_key(8, 1, 1),
        guards.idempotency_key(7, 2, 1),
        guards.idempotency_key(7, 1, 2),
        guards.idempotency_key(71, 1, 1),
        guards.idempotency_key(7, 11, 1),
    }
    assert len(keys) == 6


def test_idempotency_key_fits_the_stored_column():
    key = guards.idempotency_key(2**53 - 1, 2**31, 2**31)
    assert 0 < len(key) <= 64


# --- repeated calls --------------------------------------------------------------------------------


def test_no_repeat_below_the_limit():
    call = planned("get_weather", '{"city":"Lagos"}')
    seen = {("get_weather", call.args_hash): 1}
    assert guards.repeated_call([call], seen, {"*": 3}) is None


def test_the_call_that_reaches_the_limit_is_reported():
    call = planned("get_weather", '{ "city" : "Lagos" }')
    seen = {("get_weather", guards.args_hash('{"city":"Lagos"}', KEY)): 2}
    assert guards.repeated_call([call], seen, {"*": 3}) == call


def test_duplicates_within_one_response_count_towards_the_limit():
    calls = [planned("get_weather", '{"city":"Lagos"}', i) for i in range(3)]
    assert guards.repeated_call(calls, {}, {"*": 3}) == calls[2]
    assert guards.repeated_call(calls[:2], {}, {"*": 3}) is None


def test_per_tool_repeat_limit_overrides_the_default():
    calls = [planned("create_ticket", '{"title":"x"}', 0), planned("create_ticket", '{"title":"x"}', 1)]
    assert guards.repeated_call(calls, {}, {"*": 3, "create_ticket": 2}) == calls[1]
    assert guards.repeated_call(calls, {}, {"*": 3, "get_weather": 2}) is None


def test_different_tools_with_the_same_arguments_are_not_repeats():
    calls = [planned("a", '{"x":1}', 0), planned("b", '{"x":1}', 1)]
    assert guards.repeated_call(calls, {}, {"*": 2}) is None


def test_repeated_call_does_not_change_the_seen_counts():
    call = planned("a", "{}")
    seen = {("a", call.args_hash): 1}
    guards.repeated_call([call], seen, {"*": 5})
    assert seen == {("a", call.args_hash): 1}


# --- tool choice and budgets -----------------------------------------------------------------------


def test_first_iteration_uses_first_tool_choice_and_later_ones_later_tool_choice():
    assert guards.tool_choice_for(1, BASE_CONFIG) == "required"
    assert [guards.tool_choice_for(i, BASE_CONFIG) for i in (2, 3, 10)] == ["auto"] * 3


def test_no_budget_exceeded_inside_all_budgets():
    assert guards.budget_exceeded(config=BASE_CONFIG, tokens=999, cost=0.99, elapsed=59.9) is None


@pytest.mark.parametrize(
    "tokens,cost,elapsed,reason",
    [
        (0, 0.0, 60.0, Run.StopReason.TIME_BUDGET),
        (1000, 0.0, 0.0, Run.StopReason.TOKEN_BUDGET),
        (0, 1.0, 0.0, Run.StopReason.COST_BUDGET),
        (5000, 5.0, 600.0, Run.StopReason.TIME_BUDGET),
        (5000, 5.0, 0.0, Run.StopReason.TOKEN_BUDGET),
    ],
)
def test_budget_exceeded_names_the_budget_used_up(tokens, cost, elapsed, reason):
    assert guards.budget_exceeded(config=BASE_CONFIG, tokens=tokens, cost=cost, elapsed=elapsed) == reason


# --- tool result size ------------------------------------------------------------------------------


def test_small_results_are_sent_as_compact_json():
    payload = {"ok": True, "result": {"city": "Lagos", "temperature_c": 31}}
    content, truncated = guards.tool_result_content(payload, max_chars=1000, preview_chars=100)
    assert truncated is False
    assert json.loads(content) == payload


def test_large_results_become_valid_json_with_preview_and_original_size():
    payload = {"ok": True, "result": {"blob": "é" * 5000}}
    full = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    content, truncated = guards.tool_result_content(payload, max_chars=1000, preview_chars=100)
    assert truncated is True
    data = json.loads(content)
    assert data["truncated"] is True
    assert data["ok"] is True
    assert data["original_size"] == len(full)
    assert data["preview"] == full[:100]
    assert len(content) <= 1000


def test_a_result_exactly_at_the_limit_is_not_truncated():
    payload = {"ok": True, "result": "x"}
    size = len(json.dumps(payload, separators=(",", ":")))
    assert guards.tool_result_content(payload, max_chars=size, preview_chars=5) == (
        json.dumps(payload, separators=(",", ":")),
        False,
    )
    assert guards.tool_result_content(payload, max_chars=size - 1, preview_chars=5)[1] is True


def test_error_results_keep_ok_false_when_truncated():
    content, truncated = guards.tool_result_content({"ok": False, "error": "e" * 500}, max_chars=100, preview_chars=20)
    assert truncated and json.loads(content)["ok"] is False


# --- stop messages ---------------------------------------------------------------------------------

ALL_REASONS = list(Run.StopReason)


@pytest.mark.parametrize("reason", ALL_REASONS)
def test_every_stop_reason_has_a_plain_words_message(reason):
    config = {**BASE_CONFIG, "max_iterations": 7}
    text = guards.stop_message(reason, config, "some detail")
    assert text and text != reason
    assert " " in text and "_" not in text  # words, not an identifier
    assert "None" not in text


def test_stop_messages_name_the_limit_that_was_hit():
    config = {**BASE_CONFIG, "max_iterations": 7, "max_tokens": 1234, "max_wall_seconds": 2.5}
    assert "7 iterations" in guards.stop_message(Run.StopReason.ITERATION_LIMIT, config)
    assert "1234" in guards.stop_message(Run.StopReason.TOKEN_BUDGET, config)
    assert "2.5" in guards.stop_message(Run.StopReason.TIME_BUDGET, config)
    assert "$1.0" in guards.stop_message(Run.StopReason.COST_BUDGET, config)
    assert "HTTP 500" in guards.stop_message(Run.StopReason.MODEL_ERROR, config, "m: HTTP 500: boom")


def test_content_filter_message_without_detail_has_no_trailing_space():
    text = guards.stop_message(Run.StopReason.CONTENT_FILTER, BASE_CONFIG, "")
    assert text == text.strip() and text

