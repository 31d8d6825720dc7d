"""JSON Schema checks for tool definitions and tool arguments.

Schemas are untrusted input (typed by an admin, or sent by an MCP server): a remote `$ref` is
never fetched, size and depth are capped, and every `pattern` runs on RE2, whose matching time is
linear in the input, so a pattern like "(a+)+$" cannot hang a worker.
"""
import json
from collections.abc import Iterable
from functools import lru_cache

import re2
from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import NoSuchResource

from toolsapp.sensitive import redact, sensitive_values, touches_sensitive

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
MAX_ERROR_CHARS = 500  # of a validation message sent back to the model (it may quote the argument)


class InvalidSchema(ValueError):
    pass


def _refuse_retrieval(uri: str):
    # Called for any $ref that is not inside the schema itself: never go to the network.
    raise NoSuchResource(ref=uri)


_NO_REMOTE = Registry(retrieve=_refuse_retrieval)


def _depth(value, level=0) -> int:
    if level > MAX_SCHEMA_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


def _refs(value):
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("$ref", "$dynamicRef") and isinstance(item, str):
                yield item
            else:
                yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


@lru_cache(maxsize=1024)
def _compiled(pattern: str):
    return re2.compile(pattern, _RE2_OPTIONS)


def _patterns(value):
    """Every regular expression in a schema: `pattern` values and `patternProperties` keys."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "pattern" and isinstance(item, str):
                yield item
            elif key == "patternProperties" and isinstance(item, dict):
                yield from item.keys()
                for sub in item.values():
                    yield from _patterns(sub)
                continue
            if key not in ("const", "enum", "default", "examples"):
                yield from _patterns(item)
    elif isinstance(value, list):
        for item in value:
            yield from _patterns(item)


def _short(value: str, limit: int = 60) -> str:
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value)} characters)"


def _re2_pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _compiled(pattern).search(instance):
        yield ValidationError(f"{_short(instance)} does not match {pattern!r}")


def _re2_pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        regex = _compiled(pattern)
        for name, value in instance.items():
            if regex.search(name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


# Draft 2020-12 with RE2 for the two keywords that run regular expressions on the arguments.
_Validator = validators.extend(
    Draft202012Validator, {"pattern": _re2_pattern, "patternProperties": _re2_pattern_properties}
)


def check_tool_schema(schema) -> list[str]:
    """Raise InvalidSchema for a schema we will not run; return warnings for OpenAI strict mode."""
    if not isinstance(schema, dict):
        raise InvalidSchema("The schema must be a JSON object.")
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise InvalidSchema(f"The schema is larger than {MAX_SCHEMA_BYTES} bytes.")
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise InvalidSchema(f"The schema is nested deeper than {MAX_SCHEMA_DEPTH} levels.")
    if schema.get("type") != "object":
        raise InvalidSchema('The root of the schema must have "type": "object".')
    for ref in _refs(schema):
        if not ref.startswith("#"):
            raise InvalidSchema(f"Only local $ref (starting with #) are allowed, not {ref!r}.")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise InvalidSchema(f"Not a valid Draft 2020-12 schema: {exc.message}") from None
    for pattern in _patterns(schema):
        try:
            _compiled(pattern)
        except re2.error as exc:
            reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise InvalidSchema(
                f"The pattern {pattern!r} is not supported ({reason}); patterns use RE2 syntax, which has no "
                "backreferences or lookaround, so matching can never take exponential time."
            ) from None
    return strict_mode_warnings(schema)


def strict_mode_warnings(schema: dict) -> list[str]:
    warnings = []

    def visit(node, where):
        if not isinstance(node, dict):
            return
        if node.get("type") == "object" or "properties" in node:
            props = node.get("properties", {})
            if node.get("additionalProperties", True) is not False:
                warnings.append(f"{where}: strict mode needs additionalProperties: false")
            missing = sorted(set(props) - set(node.get("required", [])))
            if missing:
                warnings.append(f"{where}: strict mode needs every property required ({', '.join(missing)})")
            for name, sub in props.items():
                visit(sub, f"{where}.{name}")
        if isinstance(node.get("items"), dict):
            visit(node["items"], f"{where}[]")

    visit(schema, "$")
    return warnings


@lru_cache(maxsize=512)
def _validator_for(schema_json: str) -> Draft202012Validator:
    return _Validator(json.loads(schema_json), registry=_NO_REMOTE, format_checker=_FORMATS)


# The "regex" format would compile the argument with Python's re: leave it out.
_FORMATS = FormatChecker([name for name in FormatChecker.checkers if name != "regex"])


def validate_arguments(schema: dict, arguments, sensitive_fields: Iterable[str] = ()) -> str | None:
    """Return None when the arguments fit the schema, else a message naming the first problem.

    The message goes to the model, the call's record and every viewer's timeline: about a
    sensitive field it names the field and the rule it breaks, never the value."""
    validator = _validator_for(json.dumps(schema, sort_keys=True))
    try:
        error = next(iter(sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))), None)
    except re2.error:  # a stored schema from before patterns were checked
        return "the tool's schema has a pattern that is not valid RE2 syntax; an admin must fix the tool"
    except Exception as exc:  # an unresolvable local $ref and the like: the schema's fault
        return f"the tool's schema could not be applied ({type(exc).__name__})"
    if error is None:
        return None
    location = "/".join(str(p) for p in error.absolute_path) or "(root)"
    if touches_sensitive(error.absolute_path, error.instance, sensitive_fields):
        message = _rule_broken(error)
    elif len(error.message) > MAX_ERROR_CHARS:
        # A long value quoted whole ("'xxx…' is too long") would push the rule it breaks out of
        # the message: say the rule, with the value's size and start.
        message = _rule_broken(error, _value_shown(error.instance))
    else:
        message = error.message
    return f"invalid arguments at {location}: {redact(message, sensitive_values(arguments, sensitive_fields))}"


def _value_shown(value, chars: int = 60) -> str:
    """A value as an error names it: whole when short, else its size and start."""
    if isinstance(value, str) and len(value) > chars:
        return f"the value (a string of {len(value):,} characters starting {json.dumps(value[:chars], ensure_ascii=False)})"
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return f"the value {shown}" if len(shown) <= chars else f"the value ({len(shown):,} characters of JSON starting {shown[:chars]}…)"


def _rule_broken(error: ValidationError, value: str = "the value (sensitive, not shown)") -> str:
    """What a value breaks, from the schema alone: "does not satisfy pattern '^[0-9]{16}$'"."""
    rule = json.dumps(error.validator_value, ensure_ascii=False)
    if len(rule) > 200:
        rule = rule[:200] + "..."
    return f"{value} does not satisfy {error.validator} {rule}"


__all__ = ["InvalidSchema", "ValidationError", "check_tool_schema", "validate_arguments"]
