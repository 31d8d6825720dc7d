"""The one place that executes tools: validate a call, run its handler under a timeout, and turn
every outcome (including the handler's bugs) into a result the model can read.

A timeout gives up on a handler without stopping it: it may still take effect later. So a call
of a tool that is destructive or not safe to repeat that timed out has an unknown outcome, not a
failure (`call_status`), and hung handlers are bounded by `threads.py`.
"""
import json
import logging
import time
from concurrent.futures import TimeoutError as FutureTimeout

from django.conf import settings
from django.db import DatabaseError

from runs.engine.guards import parse_arguments
from runs.engine.storage.db import connection_lost, drop_connection, pause_before_retry, release_db_connection
from runs.engine.tools import threads as tool_threads
from runs.models import ToolCall
from toolsapp.executors import executor_for
from toolsapp.executors.base import ToolContext, ToolError
from toolsapp.executors.python import READ_ONLY_HANDLERS
from toolsapp.models import Tool
from toolsapp.schemas import validate_arguments

log = logging.getLogger("runs.services.tool_exec")  # its name from before the move: operators filter on it

# Handlers run in these threads so a timeout can abandon a stuck one without blocking the loop.
_pool = tool_threads.ToolThreads(
    size=max(4, settings.TOOL_PARALLEL_WORKERS * 4), max_hung=settings.TOOL_MAX_HUNG_CALLS
)
# The payload key that marks a result whose effect is unknown (the model reads it too).
OUTCOME_UNKNOWN = "unknown"


def check_call(*, tool_name: str, raw_arguments: str, tools: dict[str, Tool],
               unavailable: frozenset[str] = frozenset()) -> tuple[dict | None, str | None]:
    """(arguments, None) when the call may run, else (None, the error for the model).

    `unavailable`: tools of the run that an administrator disabled while it ran."""
    if tool_name not in tools:
        available = ", ".join(sorted(tools)) or "none"
        if tool_name in unavailable:
            return None, f"tool {tool_name!r} is unavailable: an administrator disabled it; available tools: {available}"
        if Tool.objects.filter(name=tool_name).exists():
            return None, f"tool {tool_name!r} is not allowed for this agent; available tools: {available}"
        return None, f"unknown tool {tool_name!r}; available tools: {available}"
    arguments, error = parse_arguments(raw_arguments)
    if error:
        return None, error
    error = validate_arguments(tools[tool_name].parameters, arguments, tools[tool_name].sensitive_fields)
    if error:
        return None, error
    return arguments, None


def reads_only(tool: Tool) -> bool:
    """A tool whose calls change nothing: an in-process handler registered read-only, which an
    operator has not marked destructive or unsafe to re-run. Remote tools never count: their
    latency is unknown, and the timeline should show them running."""
    return (
        tool.kind == Tool.Kind.PYTHON
        and not tool.destructive
        and tool.idempotent
        and (tool.handler or tool.name) in READ_ONLY_HANDLERS
    )


class ConnectionLostInTool(Exception):
    """The handler's database connection was lost while it ran: what it did is unknown."""


def _invoke(tool: Tool, arguments: dict, context: ToolContext):
    # Pool threads keep their database connection between calls (opening one per call would
    # cost more than most tools); a connection that broke is dropped so the next call reconnects.
    try:
        for attempt in range(2):
            try:
                return executor_for(tool.kind).call(tool, arguments, context)
            except Exception as exc:
                lost = connection_lost(exc)  # read before the connection is dropped
                if isinstance(exc, DatabaseError) or lost:
                    drop_connection()
                if not lost:
                    raise
                # A tool safe to repeat runs once more on a new connection; any other may have
                # taken effect before its connection went (its commit may have been the last thing).
                if attempt or tool.destructive or not tool.idempotent:
                    raise ConnectionLostInTool(str(exc)) from exc
                log.warning("tool %s lost its database connection (%s); running it again", tool.name, exc)
                pause_before_retry(0)
    finally:
        release_db_connection()  # back to the pool, if there is one


def call_status(payload: dict) -> str:
    """The call status a tool's payload stands for."""
    if payload["ok"]:
        return ToolCall.Status.SUCCEEDED
    return ToolCall.Status.UNKNOWN if payload.get("outcome") == OUTCOME_UNKNOWN else ToolCall.Status.FAILED


def _timed_out(tool: Tool, given_up: str) -> dict:
    seconds = f"{tool.timeout_seconds:g}"
    if given_up == tool_threads.CANCELLED:
        # It never started (every thread was busy): nothing happened.
        return {"ok": False, "error": f"the tool could not start within its timeout of {seconds} seconds; it did not run"}
    if tool.destructive or not tool.idempotent:
        return {
            "ok": False,
            "outcome": OUTCOME_UNKNOWN,
            "error": f"outcome unknown: the tool did not answer within {seconds} seconds and may still take effect. "
            "Do not call it again blindly: check the real state first (or ask the user).",
        }
    return {"ok": False, "error": f"the tool timed out after {seconds} seconds"}


def _start(tool: Tool, arguments: dict, context: ToolContext):
    """The call's future, or the payload of a call refused because its tool hangs."""
    try:
        return _pool.submit(tool.name, _invoke, tool, arguments, context)
    except tool_threads.ToolBusy as busy:
        return {
            "ok": False,
            "error": f"tool {tool.name!r} is not answering: {busy.hung} earlier calls are still running past their "
            "timeout; this call was not run. Try again later.",
        }


def _outcome(future, tool: Tool, timeout: float) -> dict:
    if isinstance(future, dict):
        return future
    try:
        result = future.result(timeout=timeout)
    except FutureTimeout:
        given_up = _pool.abandon(future)
        if given_up != tool_threads.DONE:
            return _timed_out(tool, given_up)
        return _outcome(future, tool, 0)  # it finished just now after all
    except ToolError as exc:
        return {"ok": False, "error": str(exc) or "the tool reported an error"}
    except ConnectionLostInTool:
        return {
            "ok": False,
            "outcome": OUTCOME_UNKNOWN,
            "error": "outcome unknown: the tool lost its database connection while it ran and may have taken effect. "
            "Do not call it again blindly: check the real state first (or ask the user).",
        }
    except Exception as exc:  # a bug in the handler: its type only, never a traceback
        log.warning("tool %s raised %s", tool.name, type(exc).__name__, exc_info=True)
        return {"ok": False, "error": f"the tool failed with an unexpected {type(exc).__name__}"}
    try:
        # Results are stored as JSON; anything else is turned into its JSON-able form now.
        return {"ok": True, "result": json.loads(json.dumps(result, default=str))}
    except (TypeError, ValueError) as exc:
        return {"ok": False, "error": f"the tool returned a result that is not JSON ({type(exc).__name__})"}


def execute_calls(jobs: list[tuple[Tool, dict, ToolContext]], *, parallel: bool, on_start=None):
    """Run jobs and yield (position, payload, latency_ms) in call order.

    With parallel=True all jobs start at once; otherwise each starts after the previous one
    finished. `on_start(position)` is called before a sequential job starts and may return
    False to stop (a cancelled run); the remaining jobs are then not run.
    """
    if parallel:
        started = time.perf_counter()
        futures = [_start(tool, args, ctx) for tool, args, ctx in jobs]
        for position, (future, (tool, _, _)) in enumerate(zip(futures, jobs)):
            remaining = max(0.0, started + tool.timeout_seconds - time.perf_counter())
            payload = _outcome(future, tool, remaining)
            yield position, payload, (time.perf_counter() - started) * 1000
        return
    for position, (tool, args, ctx) in enumerate(jobs):
        if on_start is not None and on_start(position) is False:
            return
        started = time.perf_counter()
        payload = _outcome(_start(tool, args, ctx), tool, tool.timeout_seconds)
        yield position, payload, (time.perf_counter() - started) * 1000
