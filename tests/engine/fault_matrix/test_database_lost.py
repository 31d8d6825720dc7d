"""Fault matrix: the database connection is lost, as a database restart, a failover or a
proxy's idle timeout does it: while the connection sits idle and in the middle of a transaction,
under the driver, under a tool that uses the database, and under a page or an API call.

PostgreSQL: the test database's backends are terminated (pg_terminate_backend, only those of
this test database). SQLite: the thread's sqlite3 connection is closed under Django. A lost
connection is a transient fault: the work goes on on a new connection, the run finishes as if
nothing happened (never internal_error), each call runs once, and every committed step and a
timeline equal to the rows are kept. A call whose outcome the lost connection hid is recorded
as outcome unknown, never as the tool's failure. The last test makes one write fail with an
error the connection survives, to show what the ending path records about a call that ran.
"""
import threading

import psycopg
import pytest
from django.db import DatabaseError, OperationalError, connection, connections
from django.test import Client
from rest_framework.test import APIClient

from hosting.sqlite import base as sqlite_backend
from runs.engine.loop import run_advance
from runs.lifecycle.runs import run_create
from runs.models import Agent, Run, RunEvent, RunRollup, Step, ToolCall, UncountedRun
from runs.observability.metrics import counter
from tests.engine.workers.test_worker_durability import FINISHED, WEATHER, assert_consistent_history, start_run
from tests.support.timeline_replay import mismatches
from toolsapp.builtin.tickets import create_ticket
from toolsapp.executors.python import python_handler
from toolsapp.models import Ticket, Tool

CUT = "fm_cut_db"
COUNT = "fm_count"
_state = {"driver": None, "cut": False, "runs": []}
_lock = threading.Lock()


def terminate_backends(*, pid: int | None = None) -> int:
    """Terminate this test database's backends (or the one `pid`), from a connection of its own;
    waits until each is gone (up to 30 s each, not 5: in a full suite on a loaded machine the cut
    call was seen to run twice, as it would if a termination landed late, inside the transaction
    that records its result). Other databases on the server are never touched."""
    sd = connection.settings_dict
    sql = ("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 30000)) FROM pg_stat_activity "
           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    params = []
    if pid is not None:
        sql, params = sql + " AND pid = %s", [pid]
    with psycopg.connect(host=sd["HOST"] or "127.0.0.1", port=sd["PORT"] or 5432, user=sd["USER"],
                         password=sd["PASSWORD"] or None, dbname=sd["NAME"], autocommit=True) as side:
        return side.execute(sql, params).fetchone()[0]


def lose_this_threads_connection() -> None:
    """The connection of the calling thread dies under Django."""
    if connection.vendor == "postgresql":
        assert terminate_backends(pid=connection.connection.info.backend_pid) == 1
    else:
        connection.connection.close()


class CutOnce:
    """An execute wrapper: the first statement starting with `prefix` (whose parameters `when`
    accepts) finds its connection lost."""

    def __init__(self, prefix: str, when=lambda params: True):
        self.prefix, self.when, self.fired = prefix, when, False

    def __call__(self, execute, sql, params, many, context):
        if not self.fired and sql.lstrip().startswith(self.prefix) and self.when(params):
            self.fired = True
            lose_this_threads_connection()
        return execute(sql, params, many, context)


@python_handler(CUT)
def cut_the_database(args, ctx):
    with _lock:
        _state["runs"].append(args["n"])
        first = not _state["cut"]
        _state["cut"] = True
    if first:
        if connection.vendor == "postgresql":
            terminate_backends()  # the driver's (idle, in the pool) and this thread's own
        elif _state["driver"].connection is not None:
            _state["driver"].connection.close()  # the driver thread's sqlite3 connection
        else:  # it waits on this tool with its connection on the shelf of idle ones: those die
            for idle in sqlite_backend._shelf.values():
                for raw in idle:
                    raw.close()
    connection.close()
    return {"n": args["n"], "ok": True}


@python_handler(COUNT)
def count_the_call(args, ctx):
    with _lock:
        _state["runs"].append(args["n"])
    return {"n": args["n"], "ok": True}


def make_tool(name: str, **flags) -> Tool:
    return Tool.objects.create(
        name=name, description=f"{name}: a fault-matrix tool.", kind="python", handler=name, timeout_seconds=5,
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        **{"destructive": False, "idempotent": True, "parallel_safe": False, **flags},
    )


@pytest.fixture
def cut_agent(demo_data):
    make_tool(CUT)
    make_tool(COUNT)
    agent = Agent.objects.create(name="fm-db", summarize_on_stop=False, max_iterations=10)
    agent.tools.set(Tool.objects.filter(name__in=[CUT, COUNT, "get_weather"]))
    _state.update(driver=connections["default"], cut=False, runs=[])
    return agent


def assert_finished_normally(run: Run, answer: str, steps: int) -> None:
    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.answer) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER, answer), (
        f"{run.status} / {run.stop_reason}: {run.stop_detail}"
    )
    assert run.lease_owner == "", "the lease is released"
    assert Step.objects.filter(run=run).count() == steps
    assert RunEvent.objects.filter(run=run, kind="step").count() == steps
    assert not ToolCall.objects.filter(run=run).exclude(status=ToolCall.Status.SUCCEEDED).exists()
    assert_consistent_history(run)
    assert mismatches(run.pk) == []


def test_a_connection_lost_while_idle_mid_iteration_is_replaced_and_the_run_finishes(cut_agent, script):
    model = script(
        {"tool_calls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}}]},
        {"tool_calls": [{"id": "c2", "name": CUT, "arguments": {"n": 2}}]},
        {"content": "finished after the database came back"},
    )
    run = run_create(agent=cut_agent, task="survive a lost connection", overrides={"models": [model]})

    run_advance(run_id=run.pk)  # the driver's connection dies while its tool runs

    assert _state["cut"]
    assert_finished_normally(run, "finished after the database came back", steps=3)
    assert _state["runs"] == [2], "the cut call ran once: its result was recorded on a new connection"
    assert ToolCall.objects.get(run=run, call_id="c2").result == {"ok": True, "result": {"n": 2, "ok": True}}
    assert len(script.requests(model)) == 3, "no model answer was lost"


LEASE_UPDATE = "UPDATE runs_run SET lease_owner = %s"


@pytest.mark.parametrize("statement", [
    'INSERT INTO "runs_step"',  # the step and its calls (records.step_create)
    'UPDATE "runs_toolcall"',  # a call's result
    "INSERT INTO runs_uncountedrun",  # the run's end: run_close -> counter.mark_uncounted
    "UPDATE runs_run SET",  # the fenced write that ends every transaction of the driver
    LEASE_UPDATE,  # the claim, before the driver starts
], ids=["step_create", "call_result", "rollup_mark", "fenced_update", "lease_claim"])
def test_a_connection_lost_mid_transaction_is_retried_and_the_run_finishes(cut_agent, script, statement):
    model = script(
        {"tool_calls": [{"id": "k1", "name": COUNT, "arguments": {"n": 1}}]},
        {"content": "finished after the retry"},
    )
    run = run_create(agent=cut_agent, task="survive a lost connection", overrides={"models": [model]})
    cut = CutOnce(statement)
    with connection.execute_wrapper(cut):  # the driver runs in this thread
        run_advance(run_id=run.pk)

    assert cut.fired
    assert_finished_normally(run, "finished after the retry", steps=2)
    assert _state["runs"] == [1], "the call ran once"
    assert len(script.requests(model)) == 2, "the iteration's transaction was retried, not the model asked again"


def test_a_connection_lost_while_counting_ended_runs_leaves_them_to_the_next_count(cut_agent, script, caplog):
    """The rollup counter runs after the ending committed: losing its connection ends nothing. The
    run stays marked (the metrics page reads it raw) and the next count adds it, once."""
    model = script({"content": "done"})
    run = run_create(agent=cut_agent, task="count me later", overrides={"models": [model]})
    cut = CutOnce('UPDATE "runs_rollupday"')  # the counter's lock of the run's day, after the ending committed
    with connection.execute_wrapper(cut):
        run = run_advance(run_id=run.pk)

    assert cut.fired
    assert (run.status, run.stop_reason) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER)
    assert "could not count ended runs" in caplog.text
    assert UncountedRun.objects.filter(run_id=run.pk).exists()
    assert counter.count_all() == 1
    assert not UncountedRun.objects.exists() and counter.count_all() == 0
    assert RunRollup.objects.filter(agent=cut_agent, whole_month=False).values_list("runs", flat=True).get() == 1


def test_the_lease_is_released_on_a_new_connection_when_the_last_one_died(cut_agent, script):
    model = script({"content": "done"})
    run = run_create(agent=cut_agent, task="release the lease", overrides={"models": [model]})
    cut = CutOnce(LEASE_UPDATE, when=lambda params: params[0] == "")  # the release, not the claim
    with connection.execute_wrapper(cut):
        returned = run_advance(run_id=run.pk)

    assert cut.fired
    assert returned is not None and returned.status == Run.Status.SUCCEEDED
    run.refresh_from_db()
    assert (run.lease_owner, run.lease_expires_at) == ("", None), "the run waits out a lease nobody holds"


def test_a_worker_whose_connections_were_terminated_while_idle_finishes_its_next_runs(
    celery_worker_proc, demo_data, wait_for_run
):
    if connection.vendor != "postgresql":
        pytest.skip("a server that closes connections: PostgreSQL (SQLite is a file each process opens)")
    celery_worker_proc(concurrency=2)
    agent = Agent.objects.get(name="demo")
    first = wait_for_run(start_run(agent, WEATHER).pk, *FINISHED)
    assert first.status == Run.Status.SUCCEEDED  # the worker's pool holds connections, idle now
    connection.close()  # this process's too: back to its pool, where they die with the others
    assert terminate_backends() >= 1

    runs = [start_run(agent, WEATHER) for _ in range(3)]
    for run in runs:
        run = wait_for_run(run.pk, *FINISHED)
        assert (run.status, run.stop_reason) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER), run.stop_detail
        assert "Lagos: 31" in run.answer
        assert_consistent_history(run)


# --- a tool that uses the database --------------------------------------------------------------

TICKET_ARGS = {"title": "[TEST] printer on fire", "body": "third floor", "priority": "high"}


@python_handler("fm_ticket_cut")
def create_ticket_losing_its_connection(args, ctx):
    """The demo create_ticket, whose first insert finds the tool thread's connection lost."""
    with _lock:
        first = not _state["cut"]
        _state["cut"] = True
    if not first:
        return create_ticket(args, ctx)
    with connection.execute_wrapper(CutOnce('INSERT INTO "toolsapp_ticket"')):
        return create_ticket(args, ctx)


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_tools_lost_connection_is_retried_or_recorded_as_outcome_unknown(cut_agent, script, idempotent):
    ticket_tool = Tool.objects.get(name="create_ticket")
    Tool.objects.create(
        name="fm_ticket", description="create_ticket, losing its connection once.", kind="python",
        handler="fm_ticket_cut", parameters=ticket_tool.parameters, timeout_seconds=10,
        destructive=False, idempotent=idempotent, parallel_safe=False,
    )
    cut_agent.tools.add(Tool.objects.get(name="fm_ticket"))
    model = script(
        {"tool_calls": [{"id": "t1", "name": "fm_ticket", "arguments": TICKET_ARGS}]},
        {"content": "ticket handled"},
    )
    run = run_create(agent=cut_agent, task="create a ticket", overrides={"models": [model]})
    run = run_advance(run_id=run.pk)

    assert _state["cut"]
    assert (run.status, run.stop_reason) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER)
    call = ToolCall.objects.get(run=run, call_id="t1")
    assert "unexpected" not in call.error
    if idempotent:  # safe to repeat: tried again on a new connection
        assert call.status == ToolCall.Status.SUCCEEDED, call.error
        assert Ticket.objects.filter(title=TICKET_ARGS["title"]).count() == 1
    else:  # its insert may or may not have committed: the model and the timeline are told so
        assert call.status == ToolCall.Status.UNKNOWN, call.error
        assert call.error.startswith("outcome unknown") and "database connection" in call.error
        assert Ticket.objects.filter(title=TICKET_ARGS["title"]).count() <= 1
    assert_consistent_history(run)
    assert mismatches(run.pk) == []


# --- the web process -----------------------------------------------------------------------------


@pytest.fixture
def finished(cut_agent, script):
    run = run_create(agent=cut_agent, task="a finished run", overrides={"models": [script({"content": "done"})]})
    return run_advance(run_id=run.pk)


def web_clients(user):
    page, api = Client(raise_request_exception=False), APIClient(raise_request_exception=False)
    page.force_login(user)
    api.force_authenticate(user)
    return page, api


def assert_fresh_or_503(response) -> None:
    assert response.status_code in (200, 503), f"{response.status_code}: {response.content[:300]!r}"
    if response.status_code == 503:
        assert int(response["Retry-After"]) > 0


def test_pages_and_api_calls_after_the_connections_were_lost_answer_200_or_503(finished, alice):
    page, api = web_clients(alice)
    urls = [f"/runs/{finished.pk}/", f"/api/v1/runs/{finished.pk}/"]
    for client, url in zip((page, api), urls):
        assert client.get(url).status_code == 200
    for client, url in zip((page, api), urls):
        # What the server does at the end of each request (Django's test client skips it): the
        # connection goes back to the pool, where it dies while idle.
        connection.close()
        if connection.vendor == "postgresql":
            assert terminate_backends() >= 1
        response = client.get(url)
        assert response.status_code == 200, "an idle connection that died is replaced before use"


@pytest.mark.parametrize("which", ["page", "api"])
def test_a_connection_lost_during_a_request_answers_503_with_retry_after(finished, alice, which):
    page, api = web_clients(alice)
    client, url = {"page": (page, f"/runs/{finished.pk}/"), "api": (api, f"/api/v1/runs/{finished.pk}/")}[which]
    cut = CutOnce('SELECT "runs_run"')
    with connection.execute_wrapper(cut):  # the test client serves the request in this thread
        response = client.get(url)
    assert cut.fired
    assert response.status_code == 503, f"{response.status_code}: {response.content[:300]!r}"
    assert int(response["Retry-After"]) > 0
    if which == "api":
        assert "database" in response.json()["detail"]
    assert_fresh_or_503(client.get(url))
    assert client.get(url).status_code == 200, "the next request gets a new connection"


# --- one failed write, then the connection works again --------------------------------------------

_fail_next_write = threading.Event()


@python_handler("fm_arm_db_failure")
def arm_db_failure(args, ctx):
    _fail_next_write.set()  # the driver's next write after this call fails, once
    return {"n": args["n"], "ok": True}


def fail_once(execute, sql, params, many, context):
    if _fail_next_write.is_set() and sql.lstrip().upper().startswith(("UPDATE", "INSERT")):
        _fail_next_write.clear()
        raise OperationalError("server closed the connection unexpectedly")
    return execute(sql, params, many, context)


def test_a_call_that_ran_is_never_recorded_as_not_executed_after_a_database_error(cut_agent, script):
    Tool.objects.create(
        name="fm_arm", description="Makes the driver's next write fail once.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        destructive=False, idempotent=True, parallel_safe=False, timeout_seconds=1, kind="python",
        handler="fm_arm_db_failure",
    )
    cut_agent.tools.add(Tool.objects.get(name="fm_arm"))
    model = script({"tool_calls": [{"id": "a1", "name": "fm_arm", "arguments": {"n": 1}}]}, {"content": "done"})
    run = run_create(agent=cut_agent, task="one failed write", overrides={"models": [model]})
    _fail_next_write.clear()
    with connection.execute_wrapper(fail_once):  # the driver runs in this thread
        try:
            run_advance(run_id=run.pk)
        except DatabaseError:
            pass
    run.refresh_from_db()
    call = ToolCall.objects.get(run=run, call_id="a1")
    assert call.status in (ToolCall.Status.SUCCEEDED, ToolCall.Status.UNKNOWN), (
        f"the call ran, but the run {run.status} records it as: {call.error}"
    )
