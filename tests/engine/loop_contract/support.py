"""Test tools and helpers shared by the loop-contract tests (see conftest.py)."""
import json
import threading

from runs.models import Agent, Run
from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler
from toolsapp.models import Tool

DEMO_TOOLS = ["create_ticket", "get_ticket", "get_weather", "lookup_order", "search_tickets", "cancel_order"]
FAST = {"Retry-After": "0.01"}  # a 429 or 503 that asks to retry at once
PROBE_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


# --- test tools ----------------------------------------------------------------------------------


class Recorder:
    """What the test handlers saw, shared with the tool threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []  # (handler, arguments, context)
        self.events = []  # ordered "start x" / "end x"
        self.release = threading.Event()  # lets a stuck handler go at the end of a test
        self.b_started = threading.Event()
        self.m_done = threading.Event()
        self.waiter_started = threading.Event()
        self.barrier = threading.Barrier(2, timeout=5)

    def reset(self):
        self.__init__()

    def record(self, name, args, ctx):
        with self.lock:
            self.calls.append((name, args, ctx))

    def note(self, text):
        with self.lock:
            self.events.append(text)

    def count(self, name):
        return sum(1 for c in self.calls if c[0] == name)


REC = Recorder()


@python_handler("contract_probe")
def _probe(args, ctx):
    REC.record("contract_probe", args, ctx)
    return {"n": args.get("n"), "seen": True}


@python_handler("contract_tool_error")
def _tool_error(args, ctx):
    REC.record("contract_tool_error", args, ctx)
    raise ToolError("the warehouse is closed on Sundays")


@python_handler("contract_crash")
def _crash(args, ctx):
    REC.record("contract_crash", args, ctx)
    raise ZeroDivisionError("secret internal detail 4242")


@python_handler("contract_stuck")
def _stuck(args, ctx):
    REC.record("contract_stuck", args, ctx)
    REC.release.wait(10)
    return {"late": True}


@python_handler("contract_big")
def _big(args, ctx):
    REC.record("contract_big", args, ctx)
    return {"blob": "x" * 2000}


@python_handler("contract_barrier")
def _barrier(args, ctx):
    REC.record("contract_barrier", args, ctx)
    # Passes only when the other call waits at the barrier at the same time.
    REC.barrier.wait()
    return {"met": True}


@python_handler("contract_seq_a")
def _seq_a(args, ctx):
    REC.note("start a")
    overlapped = REC.b_started.wait(0.2)  # would see b start if the calls overlapped
    REC.note("end a")
    return {"overlapped": overlapped}


@python_handler("contract_seq_b")
def _seq_b(args, ctx):
    REC.b_started.set()
    REC.note("start b")
    REC.note("end b")
    return {"b": True}


@python_handler("contract_waiter")
def _waiter(args, ctx):
    # Finishes only after the signaller: completion order differs from call order.
    REC.waiter_started.set()
    return {"saw_signal": REC.m_done.wait(5)}


@python_handler("contract_signaller")
def _signaller(args, ctx):
    REC.m_done.set()
    return {"signalled": True}


@python_handler("contract_cancel")
def _cancel(args, ctx):
    # An operator cancels the run while this call runs (another connection, like the web UI).
    from runs.lifecycle.runs import run_cancel

    run_cancel(run=Run.objects.get(pk=ctx.run_id))
    return {"cancel": "requested"}


@python_handler("contract_hang")
def _hang(args, ctx):
    REC.release.wait(120)  # hangs until the test ends (a handler stuck on a dead connection)
    return {"late": True}


@python_handler("contract_flip")
def _flip(args, ctx):
    # An administrator changes a tool while the run goes on (another connection, like the admin).
    tool = Tool.objects.get(name=args["tool"])
    setattr(tool, args["flag"], args["value"])
    tool.save()
    return {"flipped": args["tool"]}


TEST_TOOLS = {
    "cancel_me": {"handler": "contract_cancel"},
    "probe": {"handler": "contract_probe"},
    "probe_limited": {"handler": "contract_probe", "repeat_limit": 2},
    "tool_error": {"handler": "contract_tool_error"},
    "crash": {"handler": "contract_crash"},
    "stuck": {"handler": "contract_stuck", "timeout_seconds": 0.05},
    "big": {"handler": "contract_big"},
    "barrier_a": {"handler": "contract_barrier"},
    "barrier_b": {"handler": "contract_barrier"},
    "seq_a": {"handler": "contract_seq_a", "parallel_safe": True},
    "seq_b": {"handler": "contract_seq_b", "parallel_safe": False},
    "waiter": {"handler": "contract_waiter"},
    "signaller": {"handler": "contract_signaller"},
    # Effects that must not happen twice: a timeout or a crash leaves their outcome unknown.
    "probe_once": {"handler": "contract_probe", "idempotent": False},
    "purge_once": {"handler": "contract_probe", "idempotent": False, "destructive": True},
    # Half a second: under a loaded ./test a handler's thread took longer than 0.05 s to start,
    # and a call that never started is rightly a failed call, not an unknown outcome.
    "stuck_effect": {"handler": "contract_stuck", "timeout_seconds": 0.5, "idempotent": False},
    "stuck_destructive": {"handler": "contract_stuck", "timeout_seconds": 0.5, "destructive": True},
    "hang": {"handler": "contract_hang", "timeout_seconds": 0.5, "idempotent": False},
    "probe_quick": {"handler": "contract_probe", "timeout_seconds": 5},
    "flip": {"handler": "contract_flip"},
}


# --- helpers -------------------------------------------------------------------------------------


def call(name, arguments=None, call_id=None):
    entry = {"name": name, "arguments": {} if arguments is None else arguments}
    if call_id:
        entry["id"] = call_id
    return entry


def calls(*items):
    return {"tool_calls": list(items)}


def tool_messages(request):
    return [m for m in request["messages"] if m["role"] == "tool"]


def result_for(request, call_id):
    found = [m for m in tool_messages(request) if m["tool_call_id"] == call_id]
    assert len(found) == 1, f"expected exactly one result for {call_id}, got {found}"
    return json.loads(found[0]["content"])


def one_call(launch, script, name, arguments, *, tools, call_id="call_1", **overrides):
    """A run whose model makes one call, then answers. -> (run, requests, the result the model read)."""
    model = script(calls(call(name, arguments, call_id)), {"content": "done"})
    run = launch("use the tool", models=[model], tools=tools, summarize_on_stop=False, **overrides)
    requests = script.requests(model)
    assert len(requests) == 2
    return run, requests, result_for(requests[1], call_id)


def make_agent(name, **fields):
    agent = Agent.objects.create(name=name, summarize_on_stop=False, **fields)
    agent.tools.set(Tool.objects.filter(name__in=DEMO_TOOLS))
    return agent


