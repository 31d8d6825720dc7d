"""Order in code where order matters: a tool may require that a read happened earlier in the run
(Tool.requires_read = {"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}}: a call of
cancel_order needs an earlier lookup_order of the same order_id that succeeded).

A call without that read is refused as data, before the gate (so no person is ever asked about
it): its result tells the model exactly what to call first. The model fills in the parameters;
the code keeps the order. `read_refusal` decides over plain data; `unread_refused` is the loop's
hook, one query for an answer whose calls need a read, none otherwise."""
import json
from collections import defaultdict
from typing import Any

from hosting.text import loads as bounded_loads
from runs.models import ToolCall
from toolsapp.argument_paths import arguments_taken, path_parts, same_value


def requirement(spec: Any) -> dict | None:
    """A tool's requires_read as {"tool", "arguments"}; None when it names none; ValueError when
    it is not usable (the editor refuses such a setting; one written elsewhere still holds)."""
    if not spec:
        return None
    if not isinstance(spec, dict) or not isinstance(spec.get("tool"), str) or not spec["tool"].strip():
        raise ValueError("it names no tool")
    mapping = spec.get("arguments") or {}
    if not isinstance(mapping, dict) or not all(isinstance(name, str) for name in mapping):
        raise ValueError("its arguments are not a list of names and paths")
    for path in mapping.values():
        path_parts(path)
    return {"tool": spec["tool"].strip(), "arguments": mapping}


def read_refusal(*, tool_name: str, spec: Any, arguments: dict, earlier: list[dict], callable_tools=None,
                 sensitive_fields=()) -> str | None:
    """The error the model reads when this call lacks its required read, else None.

    `earlier`: the arguments of the named tool's calls that succeeded earlier in this run;
    `callable_tools`: the tools the run may call (None: not known), to say when the read cannot
    be made; `sensitive_fields`: the calling tool's, whose values the error never quotes."""
    try:
        needed = requirement(spec)
    except ValueError as exc:
        return (f"{tool_name} cannot be called: its required earlier read is set up wrongly ({exc}); "
                "an administrator must fix the tool's settings")
    if needed is None:
        return None
    read, mapping = needed["tool"], needed["arguments"]
    values, missing = arguments_taken(mapping, arguments)
    if missing:
        return (f"{tool_name} needs {read} earlier in this run with the values at {', '.join(missing)} of this call, "
                f"and this call has none there: call {read} first, then ask again with them")
    if any(all(same_value(call.get(name), value) for name, value in values.items())
           for call in earlier if isinstance(call, dict)):
        return None
    wanted = _values_text(values, mapping, sensitive_fields)
    with_values = f" with {wanted}" if wanted else ""
    if callable_tools is not None and read not in callable_tools:
        return (f"{tool_name} needs {read}{with_values} earlier in this run, and this agent may not call {read}: "
                f"{tool_name} cannot be called in this run")
    return f"{tool_name} needs {read}{with_values} earlier in this run: call {read} first, then ask again"


def _values_text(values: dict, mapping: dict, sensitive_fields) -> str:
    """ 'order_id "ORD-1001"', a sensitive value named by its path instead of quoted."""
    sensitive = {name.lower() for name in sensitive_fields or () if isinstance(name, str)}
    parts = []
    for name, value in values.items():
        path = mapping[name]
        if any(isinstance(p, str) and p.lower() in sensitive for p in path_parts(path)):
            parts.append(f"{name} equal to this call's {path}")
        else:
            parts.append(f"{name} {json.dumps(value, ensure_ascii=False)}")
    return " and ".join(parts)


def unread_refused(*, run_id: int, planned: list, checks: list[tuple], tools: dict) -> list[tuple]:
    """`checks` ((arguments, error) per planned call, after schema validation) with the calls that
    lack their required read refused: (None, the error). One query when some call needs a read."""
    needing = {
        p.index: tools[p.tool_name].requires_read
        for p, (arguments, error) in zip(planned, checks)
        if error is None and p.tool_name in tools and tools[p.tool_name].requires_read
    }
    if not needing:
        return checks
    reads = {spec.get("tool") for spec in needing.values() if isinstance(spec, dict) and isinstance(spec.get("tool"), str)}
    earlier: dict[str, list[dict]] = defaultdict(list)
    rows = ToolCall.objects.filter(run_id=run_id, tool_name__in={r.strip() for r in reads},
                                   status=ToolCall.Status.SUCCEEDED)
    for name, arguments, executed in rows.values_list("tool_name", "arguments", "executed_arguments"):
        try:  # what it ran with: an operator's edit when it had one
            earlier[name].append(bounded_loads(executed or arguments or "{}"))
        except ValueError:
            continue
    result = list(checks)
    for position, p in enumerate(planned):
        if p.index not in needing:
            continue
        spec = needing[p.index]
        read = spec.get("tool", "").strip() if isinstance(spec, dict) and isinstance(spec.get("tool"), str) else ""
        error = read_refusal(tool_name=p.tool_name, spec=spec, arguments=checks[position][0], earlier=earlier[read],
                             callable_tools=tools, sensitive_fields=tools[p.tool_name].sensitive_fields)
        if error:
            result[position] = (None, error)
    return result
