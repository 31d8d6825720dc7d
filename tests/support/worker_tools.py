"""Tools for the worker-durability tests, loaded by real Celery workers through
`TOOL_MODULES=tests.support.worker_tools` (and imported by the test process too).

Every execution of these tools is appended, one JSON line per event, to the file named by the
`DURABILITY_TOOL_LOG` environment variable (the test passes a tmp file to the worker). Lines are
written with a single O_APPEND write, so several threads and processes can share the file; the
test counts the "start" lines per idempotency key to know how often a call really ran.
"""
import json
import os
import signal
import time

# A worker imports the loop (and the model client) at its first task, which takes a second or
# more; importing it here, while Django starts, makes "ready" in the log mean ready to drive runs.
import runs.engine.loop  # noqa: F401,E402
from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler
from toolsapp.verifiers import verifier

LOG_ENV = "DURABILITY_TOOL_LOG"

SLOW = "durable_slow"  # idempotent, read-only, slow: the ordinary tool of a long run
PURGE = "durable_purge"  # destructive and NOT idempotent: must never run twice unasked
CRASH = "durable_crash"  # idempotent; kills the worker process that runs it (a poisoned run)
CRASH_ENV = "DURABILITY_CRASH_OK"  # set to 1 only in the environment of workers meant to die
AGENT = "durable"


def _record(event: str, tool: str, args: dict, ctx) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = json.dumps(
        {
            "event": event,
            "tool": tool,
            "run": ctx.run_id,
            "call_id": ctx.call_id,
            "key": ctx.idempotency_key,
            "args": args,
            "pid": os.getpid(),
            "t": time.time(),
        }
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def executions(path, *, tool: str | None = None, run: int | None = None, event: str = "start") -> list[dict]:
    """The recorded events of the log (start lines by default)."""
    try:
        with open(path, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []
    return [
        r
        for r in rows
        if r["event"] == event and (tool is None or r["tool"] == tool) and (run is None or r["run"] == run)
    ]


@python_handler(SLOW)
def durable_slow(args, ctx):
    _record("start", SLOW, args, ctx)
    time.sleep(float(args.get("seconds", 0.3)))
    _record("end", SLOW, args, ctx)
    return {"n": args.get("n"), "done": True}


@python_handler(PURGE)
def durable_purge(args, ctx):
    _record("start", PURGE, args, ctx)
    if not args.get("target"):
        raise ToolError("target is required")
    time.sleep(float(args.get("seconds", 0)))
    _record("end", PURGE, args, ctx)
    return {"purged": args["target"]}


@python_handler(CRASH)
def durable_crash(args, ctx):
    _record("start", CRASH, args, ctx)
    if os.environ.get(CRASH_ENV) != "1":
        raise ToolError("this process may not be crashed")
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)  # like a segfault or the OOM killer: no cleanup at all
    time.sleep(10)


@verifier("durable_no_duplicates")
def durable_no_duplicates(*, run_id, answer, customer=""):
    """The run's purges each ran at most once (checked in the worker, on the final answer)."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return True, ""
    keys = [r["key"] for r in executions(path, tool=PURGE, run=run_id)]
    if len(keys) != len(set(keys)):
        return False, "a purge ran twice"
    return True, ""


def install(*, max_iterations: int = 20):
    """Create the durability tools and the `durable` agent (call inside the test database)."""
    from runs.models import Agent
    from toolsapp.models import Tool

    def obj(properties, required):
        return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}

    Tool.objects.update_or_create(
        name=SLOW,
        defaults=dict(
            description="Slow, idempotent test tool.",
            parameters=obj({"n": {"type": "integer"}, "seconds": {"type": "number", "minimum": 0}}, ["n"]),
            destructive=False,
            idempotent=True,
            parallel_safe=False,  # calls of one step run one after another (cancel checks between them)
            timeout_seconds=2,
            repeat_limit=50,
            kind="python",
            handler=SLOW,
        ),
    )
    Tool.objects.update_or_create(
        name=PURGE,
        defaults=dict(
            description="Destructive, non-idempotent test tool.",
            parameters=obj({"target": {"type": "string"}, "seconds": {"type": "number", "minimum": 0}}, ["target"]),
            destructive=True,
            idempotent=False,
            parallel_safe=False,
            timeout_seconds=5,
            kind="python",
            handler=PURGE,
        ),
    )
    Tool.objects.update_or_create(
        name=CRASH,
        defaults=dict(
            description="Kills the worker that runs it.",
            parameters=obj({"n": {"type": "integer"}}, []),
            destructive=False,
            idempotent=True,
            parallel_safe=False,
            timeout_seconds=1,
            repeat_limit=50,
            kind="python",
            handler=CRASH,
        ),
    )
    agent, _ = Agent.objects.update_or_create(
        name=AGENT,
        defaults=dict(
            system_prompt="Durability test agent.",
            max_iterations=max_iterations,
            repeat_limit=5,
            max_wall_seconds=600,
            summarize_on_stop=False,
            verifier="durable_no_duplicates",
        ),
    )
    agent.tools.set(Tool.objects.filter(name__in=[SLOW, PURGE, CRASH, "create_ticket", "get_weather", "lookup_order", "cancel_order"]))
    return agent
