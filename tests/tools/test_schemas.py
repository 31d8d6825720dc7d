"""Tool definition schemas (check_tool_schema) and argument validation (validate_arguments)."""
import socket
import urllib.request

import pytest

from toolsapp.schemas import (
    MAX_SCHEMA_DEPTH,
    InvalidSchema,
    check_tool_schema,
    validate_arguments,
)

STRICT = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


def nested(depth):
    schema = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


# --- check_tool_schema -----------------------------------------------------------------------------


def test_strict_valid_schema_has_no_warnings():
    assert check_tool_schema(STRICT) == []


def test_valid_but_loose_schema_is_accepted_with_strict_mode_warnings():
    warnings = check_tool_schema({"type": "object", "properties": {"city": {"type": "string"}}})
    assert any("additionalProperties" in w for w in warnings)
    assert any("city" in w and "required" in w for w in warnings)


def test_warnings_point_into_nested_objects():
    schema = {
        "type": "object",
        "properties": {"address": {"type": "object", "properties": {"zip": {"type": "string"}}}},
        "required": ["address"],
        "additionalProperties": False,
    }
    warnings = check_tool_schema(schema)
    assert warnings and all(w.startswith("$.address") for w in warnings)


@pytest.mark.parametrize(
    "schema",
    [[], "object", None, 42, {"type": "array", "items": {"type": "string"}}, {"type": "string"}, {"properties": {}}],
    ids=["list", "string", "null", "number", "array-root", "string-root", "no-type"],
)
def test_schema_whose_root_is_not_an_object_is_refused(schema):
    with pytest.raises(InvalidSchema):
        check_tool_schema(schema)


@pytest.mark.parametrize(
    "ref",
    [
        "https://example.com/schemas/city.json",
        "http://127.0.0.1:9/x.json",
        "file:///etc/passwd",
        "other.json#/defs/city",
        "urn:example:city",
    ],
)
def test_remote_ref_is_refused(no_network, ref):
    schema = {"type": "object", "properties": {"city": {"$ref": ref}}}
    with pytest.raises(InvalidSchema, match="local \\$ref"):
        check_tool_schema(schema)


def test_remote_dynamic_ref_is_refused(no_network):
    schema = {"type": "object", "properties": {"city": {"$dynamicRef": "https://example.com/s.json#meta"}}}
    with pytest.raises(InvalidSchema):
        check_tool_schema(schema)


def test_remote_ref_hidden_in_a_list_is_refused(no_network):
    schema = {"type": "object", "properties": {"x": {"anyOf": [{"type": "null"}, {"$ref": "https://evil.test/s"}]}}}
    with pytest.raises(InvalidSchema):
        check_tool_schema(schema)


def test_local_ref_is_accepted():
    schema = {
        "type": "object",
        "$defs": {"city": {"type": "string"}},
        "properties": {"city": {"$ref": "#/$defs/city"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    assert check_tool_schema(schema) == []


def test_schema_nested_too_deep_is_refused():
    with pytest.raises(InvalidSchema, match="deeper"):
        check_tool_schema(nested(MAX_SCHEMA_DEPTH))


def test_schema_within_the_depth_limit_is_accepted():
    check_tool_schema(nested(5))


def test_huge_schema_is_refused():
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(1000)}}
    with pytest.raises(InvalidSchema, match="larger"):
        check_tool_schema(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "nosuchtype"}}},
        {"type": "object", "required": "a"},
        {"type": "object", "properties": {"a": {"minLength": -1}}},
        {"type": "object", "properties": []},
        {"type": "object", "additionalProperties": "no"},
    ],
    ids=["unknown-type", "required-not-list", "negative-minLength", "properties-list", "additionalProperties-string"],
)
def test_invalid_draft_2020_12_schema_is_refused(schema):
    with pytest.raises(InvalidSchema, match="Draft 2020-12"):
        check_tool_schema(schema)


# --- validate_arguments ----------------------------------------------------------------------------


def test_arguments_that_fit_are_valid():
    assert validate_arguments(STRICT, {"city": "Lagos", "days": 3}) is None


def test_wrong_type_names_the_field():
    error = validate_arguments(STRICT, {"city": "Lagos", "days": "three"})
    assert error.startswith("invalid arguments at days:")


def test_missing_required_field_is_reported_at_the_root():
    error = validate_arguments(STRICT, {"city": "Lagos"})
    assert error.startswith("invalid arguments at (root):") and "days" in error


def test_extra_field_is_refused_when_additional_properties_is_false():
    error = validate_arguments(STRICT, {"city": "Lagos", "days": 1, "admin": True})
    assert error and "admin" in error


def test_range_and_length_constraints_are_enforced():
    assert validate_arguments(STRICT, {"city": "Lagos", "days": 8})
    assert validate_arguments(STRICT, {"city": "", "days": 1})


def test_arguments_that_are_not_an_object_are_refused():
    assert validate_arguments(STRICT, ["Lagos", 3])


def test_nested_error_location_is_a_path():
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {"qty": {"type": "integer"}}}}},
    }
    error = validate_arguments(schema, {"items": [{"qty": 1}, {"qty": "two"}]})
    assert error.startswith("invalid arguments at items/1/qty:")


def test_formats_are_checked():
    schema = {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}
    assert validate_arguments(schema, {"email": "ops@example.com"}) is None
    assert validate_arguments(schema, {"email": "not-an-email"})


def test_local_ref_is_followed_when_validating():
    schema = {"type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}}
    assert validate_arguments(schema, {"n": 1}) is None
    assert validate_arguments(schema, {"n": "one"})


def test_remote_ref_is_never_fetched_when_validating(no_network):
    schema = {"type": "object", "properties": {"city": {"$ref": "http://127.0.0.1:9/city.json"}}}
    error = validate_arguments(schema, {"city": "Lagos"})
    assert error and "could not be applied" in error


def test_broken_local_ref_is_an_error_not_a_crash():
    schema = {"type": "object", "properties": {"city": {"$ref": "#/$defs/missing"}}}
    error = validate_arguments(schema, {"city": "Lagos"})
    assert error and "could not be applied" in error


# --- Regular expressions in schemas run on RE2 -------------------------------------------------

EVIL = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}}


def test_catastrophic_pattern_is_accepted_and_cannot_hang_validation():
    # Python's re needs ~2^n steps for this input; RE2 answers in linear time. Run it in a
    # thread so a regression fails the test instead of hanging the suite.
    import threading

    assert check_tool_schema(EVIL) is not None
    outcome = []
    worker = threading.Thread(
        target=lambda: outcome.append(validate_arguments(EVIL, {"name": "a" * 100_000 + "!"})), daemon=True
    )
    worker.start()
    worker.join(timeout=30)
    assert outcome, "validation of a catastrophic pattern did not finish"
    assert outcome[0].startswith("invalid arguments at name:")
    assert "100001 characters" in outcome[0] and len(outcome[0]) < 300  # the argument is not echoed whole
    assert validate_arguments(EVIL, {"name": "aaaa"}) is None


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=x)y", r"(?<!a)b"])
def test_patterns_that_need_backtracking_are_refused_with_a_reason(pattern):
    with pytest.raises(InvalidSchema, match="RE2 syntax"):
        check_tool_schema({"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}})
    with pytest.raises(InvalidSchema, match="not supported"):
        check_tool_schema({"type": "object", "patternProperties": {pattern: {"type": "string"}}})


def test_pattern_properties_are_matched_with_re2():
    schema = {"type": "object", "patternProperties": {r"^n_\d+$": {"type": "integer"}}}
    check_tool_schema(schema)
    assert validate_arguments(schema, {"n_1": 3, "other": "x"}) is None
    assert "n_2" in validate_arguments(schema, {"n_2": "three"})


def test_a_property_named_pattern_is_not_mistaken_for_a_regex():
    schema = {"type": "object", "properties": {"pattern": {"type": "string"}}, "examples": [{"pattern": "(a)\\1"}]}
    check_tool_schema(schema)
    assert validate_arguments(schema, {"pattern": "(a)\\1"}) is None


def test_regex_format_does_not_compile_arguments_with_python_re():
    schema = {"type": "object", "properties": {"r": {"type": "string", "format": "regex"}}}
    assert validate_arguments(schema, {"r": "(a+)+$"}) is None


def test_a_long_value_names_the_rule_it_breaks_not_only_its_start():
    """A megabyte string past maxLength: jsonschema quotes the whole value before "is too long"; the
    message says the rule, the value's size and its start, and stays short."""
    schema = {"type": "object", "properties": {"body": {"type": "string", "maxLength": 4000}}}
    error = validate_arguments(schema, {"body": "x" * 1_000_000})
    assert error == ('invalid arguments at body: the value (a string of 1,000,000 characters starting "'
                     + "x" * 60 + '") does not satisfy maxLength 4000')
    short = {"type": "object", "properties": {"body": {"type": "string", "maxLength": 3}}}
    assert validate_arguments(short, {"body": "xxxx"}) == "invalid arguments at body: 'xxxx' is too long"
