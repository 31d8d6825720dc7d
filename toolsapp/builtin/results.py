"""read_tool_result: the model reads an earlier result of its own run again, by call id.

When a run's conversation passes its context budget, older results are summarised in the
requests (runs/engine/context/window.py); the journal keeps them whole, and this tool gives one back as
the model was first sent it. A summary names the call id and the step that asked for it: some
servers number calls per answer, so an id may repeat in a run, and the step tells them apart
(without it, the latest call of that id). Only the run's own calls: another run's are not found.
"""
import json

from runs.models import ToolCall
from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler


@python_handler("read_tool_result", read_only=True)
def read_tool_result(args, ctx):
    call_id = args["call_id"]
    calls = ToolCall.objects.filter(run_id=ctx.run_id, call_id=call_id).exclude(idempotency_key=ctx.idempotency_key)
    if args.get("step") is not None:
        calls = calls.filter(step__index=args["step"])
    found = calls.order_by("-step__index", "-index").values_list("tool_name", "status", "result_text").first()
    if found is None:
        where = f" at step {args['step']}" if args.get("step") is not None else ""
        raise ToolError(f"this run has no earlier call with the id {call_id!r}{where}")
    tool_name, status, text = found
    if not text:
        raise ToolError(f"call {call_id!r} ({tool_name}) has no result yet (it is {status})")
    try:
        payload = json.loads(text)
    except ValueError:
        return {"result": text}
    if not isinstance(payload, dict) or payload.get("truncated"):
        return payload  # a result that was already too long: its preview, as it was sent
    if not payload.get("ok"):
        raise ToolError(f"call {call_id!r} ({tool_name}) failed: {payload.get('error')}")
    # The result itself: wrapped again as this call's result, the model reads exactly what it
    # was first sent, no longer (so it stays within the same bound).
    return payload.get("result")
