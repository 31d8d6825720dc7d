"""JSON Schema checks for tool definitions and tool arguments.

Schemas are untrusted input: a remote `$ref` is never fetched, and size and depth are capped.
"""
import json
from functools import lru_cache

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import NoSuchResource

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32


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
    return Draft202012Validator(json.loads(schema_json), registry=_NO_REMOTE, format_checker=FormatChecker())


def validate_arguments(schema: dict, arguments) -> str | None:
    """Return None when the arguments fit the schema, else a message naming the first problem."""
    validator = _validator_for(json.dumps(schema, sort_keys=True))
    try:
        error = next(iter(sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))), None)
    except Exception as exc:  # an unresolvable local $ref and the like: the schema's fault
        return f"the tool's schema could not be applied ({type(exc).__name__})"
    if error is None:
        return None
    location = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"invalid arguments at {location}: {error.message}"


__all__ = ["InvalidSchema", "ValidationError", "check_tool_schema", "validate_arguments"]
