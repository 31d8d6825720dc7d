"""read_tool_result: the model reads an earlier result of its own run again, by call id.

When a run's conversation passes its context budget, older results are summarised in the
requests (runs/engine/context.py); the journal keeps them whole, and this tool gives one back,
bounded like every result (the result text the model was first sent). Only the run's own calls:
a call id of another run is not found.
"""
import json

from runs.models import ToolCall
from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler


@python_handler("read_tool_result", read_only=True)
def read_tool_result(args, ctx):
    call_id = args["call_id"]
    found = (
        ToolCall.objects.filter(run_id=ctx.run_id, call_id=call_id)
        .exclude(call_id=ctx.call_id)
        .order_by("-step_id", "-index")
        .values_list("tool_name", "status", "result_text")
        .first()
    )
    if found is None:
        raise ToolError(f"this run has no earlier call with the id {call_id!r}")
    tool_name, status, text = found
    if not text:
        raise ToolError(f"call {call_id!r} ({tool_name}) has no result yet (it is {status})")
    try:
        return json.loads(text)  # the result as the model was first sent it, not a string of it
    except ValueError:
        return {"result": text}
