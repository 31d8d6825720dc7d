"""Tools whose effect lives outside the run's rows, for the crash-window rows of the fault matrix.

Loaded by real Celery workers through `TOOL_MODULES` (see `worker_env`) and imported by the test
process. Each handler appends its effect to the file named by `EFFECT_LOG_ENV` (one O_APPEND
write a line, so processes can share the file) and, in a worker started with `DIE_ENV=1`, kills
its own process right after the effect: the side effect exists, its result was never recorded.
"""
import json
import os
import signal
import time

from toolsapp.executors.python import python_handler

EFFECT_LOG_ENV = "FAULT_MATRIX_EFFECT_LOG"
DIE_ENV = "FAULT_MATRIX_DIE_AFTER_EFFECT"
KEYED = "fm_keyed_effect"  # idempotent: makes its effect once per idempotency key, like a real API
UNKEYED = "fm_unkeyed_effect"  # destructive and not idempotent: every execution is a new effect


def _append(event: str, tool: str, args: dict, ctx) -> None:
    line = json.dumps({"event": event, "tool": tool, "key": ctx.idempotency_key, "call_id": ctx.call_id,
                       "run": ctx.run_id, "args": args, "pid": os.getpid(), "t": time.time()})
    fd = os.open(os.environ[EFFECT_LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def effect_lines(path, *, event: str = "effect", run: int | None = None) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []
    return [r for r in rows if r["event"] == event and (run is None or r["run"] == run)]


def _die_if_asked() -> None:
    if os.environ.get(DIE_ENV) == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # no cleanup at all, like the OOM killer
        time.sleep(10)


@python_handler(KEYED)
def keyed_effect(args, ctx):
    _append("start", KEYED, args, ctx)
    path = os.environ[EFFECT_LOG_ENV]
    if any(r["key"] == ctx.idempotency_key for r in effect_lines(path)):
        return {"target": args["target"], "effect": "already made"}
    _append("effect", KEYED, args, ctx)
    _die_if_asked()
    return {"target": args["target"], "effect": "made"}


@python_handler(UNKEYED)
def unkeyed_effect(args, ctx):
    _append("start", UNKEYED, args, ctx)
    _append("effect", UNKEYED, args, ctx)
    _die_if_asked()
    return {"target": args["target"], "effect": "made"}


def install(agent) -> None:
    """The two tools, allowed for `agent` (call inside the test database)."""
    from toolsapp.models import Tool

    schema = {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"],
              "additionalProperties": False}
    common = dict(parameters=schema, parallel_safe=False, timeout_seconds=5, kind="python")
    Tool.objects.update_or_create(name=KEYED, defaults=dict(
        description="Makes one effect per idempotency key.", destructive=False, idempotent=True, handler=KEYED, **common))
    Tool.objects.update_or_create(name=UNKEYED, defaults=dict(
        description="Makes an effect every time it runs.", destructive=True, idempotent=False, handler=UNKEYED, **common))
    agent.tools.add(*Tool.objects.filter(name__in=[KEYED, UNKEYED]))
