"""Tools from MCP servers, against real servers: the demo server as a stdio subprocess and over
Streamable HTTP, and a misbehaving one (mcp_odd_server.py)."""
import json
import socket
import subprocess
import sys
import threading
import time

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from runs.models import Run, ToolCall
from tests.support.approval_fixtures import make_user
from toolsapp.executors import ToolContext, ToolError, executor_for
from toolsapp.executors.mcp import McpExecutor
from toolsapp.mcp.discovery import mcp_server_discover
from toolsapp.models import McpServer, Tool

DEMO = [sys.executable, "-m", "toolsapp.mcp.demo_server"]
ODD = [sys.executable, "-m", "tests.tools.mcp_odd_server"]
pytestmark = pytest.mark.worker  # real MCP server processes


@pytest.fixture(autouse=True)
def python_may_run_mcp_servers(settings):
    # The servers here are rows written directly, not saved by a superuser: the host's operator
    # lists the interpreter that runs them (tests/tools/test_mcp_stdio_rules.py covers the rule).
    settings.MCP_STDIO_COMMANDS = [sys.executable, "demo-mcp", "/nonexistent/mcp-server"]


def test_mcp_tools_are_executed_by_the_mcp_client():
    assert isinstance(executor_for("mcp"), McpExecutor)


@pytest.fixture
def state_file(tmp_path):
    return tmp_path / "stock.json"


@pytest.fixture
def demo(demo_data, state_file):
    return McpServer.objects.create(name="demo", command=json.dumps([*DEMO, "--state", str(state_file)]))


@pytest.fixture
def odd(demo_data):
    return McpServer.objects.create(name="odd", command=" ".join(ODD))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def http_demo():
    """The demo server over Streamable HTTP on a free local port -> its URL."""
    port = _free_port()
    process = subprocess.Popen([*DEMO, "--transport", "http", "--port", str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("the demo MCP server did not start")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp", port
    process.terminate()
    process.wait(10)


def stock(state_file) -> dict:
    return json.loads(state_file.read_text())["stock"] if state_file.exists() else {}


# --- discovery -------------------------------------------------------------------------------------


def test_discovery_stores_the_servers_tools_with_their_schemas_and_safe_flags(demo):
    result = mcp_server_discover(server=demo)
    assert result.ok, result.error
    assert sorted(result.added) == ["demo__add", "demo__flaky", "demo__lookup_stock", "demo__restock"]

    lookup = Tool.objects.get(name="demo__lookup_stock")
    assert lookup.kind == "mcp" and lookup.mcp_server == demo and lookup.config == {"remote_name": "lookup_stock"}
    assert lookup.parameters["properties"]["sku"]["pattern"] == r"^SKU-\d+$"
    assert lookup.description == "How many units of an item are in stock."
    assert (lookup.destructive, lookup.idempotent) == (False, True)  # readOnlyHint
    restock = Tool.objects.get(name="demo__restock")
    assert (restock.destructive, restock.idempotent) == (True, True)
    demo.refresh_from_db()
    assert demo.last_discovered_at is not None and demo.last_error == ""


def test_rediscovery_keeps_admin_edits_and_disables_tools_the_server_dropped(demo):
    mcp_server_discover(server=demo)
    Tool.objects.filter(name="demo__restock").update(destructive=False, idempotent=False)
    Tool.objects.filter(name="demo__add").update(enabled=False, description="stale")
    gone = Tool.objects.create(name="demo__retired", kind="mcp", mcp_server=demo, config={"remote_name": "retired"})

    result = mcp_server_discover(server=demo)

    assert result.ok and result.added == []
    assert result.disabled == ["demo__retired"]
    assert result.updated == ["demo__add"]  # its description came back from the server
    restock = Tool.objects.get(name="demo__restock")
    assert (restock.destructive, restock.idempotent) == (False, False)
    add = Tool.objects.get(name="demo__add")
    assert add.enabled is False and add.description == "Add two numbers."
    gone.refresh_from_db()
    assert gone.enabled is False


def test_a_tool_with_a_remote_ref_schema_is_refused_and_the_others_stored(odd):
    result = mcp_server_discover(server=odd)
    assert result.ok
    assert [name for name, _ in result.refused] == ["remote_ref"]
    assert "Only local $ref" in result.refused[0][1]
    assert sorted(result.added) == ["odd__env_names", "odd__evil_output", "odd__hang", "odd__huge"]
    assert not Tool.objects.filter(name="odd__remote_ref").exists()


def test_a_stdio_server_sees_only_the_passthrough_environment(odd, monkeypatch, settings):
    monkeypatch.setenv("AGENTSITE_TEST_SECRET", "s3cret")
    settings.MCP_STDIO_ENV_PASSTHROUGH = ["PATH"]
    mcp_server_discover(server=odd)
    tool = Tool.objects.get(name="odd__env_names")
    names = McpExecutor().call(tool, {}, ToolContext(run_id=1, call_id="c", idempotency_key="k"))
    assert "PATH" in names["result"]
    assert "AGENTSITE_TEST_SECRET" not in names["result"]


def test_a_server_that_does_not_answer_in_time_is_a_tool_error(odd):
    mcp_server_discover(server=odd)
    tool = Tool.objects.get(name="odd__hang")
    tool.timeout_seconds = 1
    with pytest.raises(ToolError, match="did not answer within 1 seconds"):
        McpExecutor().call(tool, {"seconds": 60}, ToolContext(run_id=1, call_id="c", idempotency_key="k"))


def test_a_hostile_output_schema_is_not_run_against_the_result(odd):
    # "^(a+)+$" against 40 a's and a "!" takes Python's re about 2^40 steps: the call would time out.
    mcp_server_discover(server=odd)
    tool = Tool.objects.get(name="odd__evil_output")
    tool.timeout_seconds = 20
    outcome = []
    caller = threading.Thread(
        target=lambda: outcome.append(McpExecutor().call(tool, {}, ToolContext(run_id=1, call_id="c", idempotency_key="k"))),
        daemon=True,  # a regression spins in re for hours: fail the test instead of hanging the suite
    )
    caller.start()
    caller.join(timeout=60)
    assert outcome == [{"name": "a" * 40 + "!"}]


def test_a_result_larger_than_the_cap_is_a_tool_error(odd, settings):
    settings.MCP_MAX_RESULT_BYTES = 100_000
    mcp_server_discover(server=odd)
    tool = Tool.objects.get(name="odd__huge")
    context = ToolContext(run_id=1, call_id="c", idempotency_key="k")
    assert McpExecutor().call(tool, {"size": 1000}, context) == {"result": "z" * 1000}
    with pytest.raises(ToolError, match="result is larger than 100000 bytes"):
        McpExecutor().call(tool, {"size": 500_000}, context)


def test_a_command_that_cannot_start_is_recorded_as_the_servers_error(demo_data):
    server = McpServer.objects.create(name="broken", command="/nonexistent/mcp-server --stdio")
    result = mcp_server_discover(server=server)
    assert not result.ok and "FileNotFoundError" in result.error
    server.refresh_from_db()
    assert "FileNotFoundError" in server.last_error and server.last_discovered_at is None


# --- streamable HTTP and the outbound guard -------------------------------------------------------------


def test_discovery_and_calls_over_streamable_http_with_the_address_allowlisted(demo_data, http_demo, settings):
    url, port = http_demo
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{port}"]
    server = McpServer.objects.create(name="web", transport="http", url=url)
    assert sorted(mcp_server_discover(server=server).added) == [
        "web__add", "web__flaky", "web__lookup_stock", "web__restock",
    ]
    tool = Tool.objects.get(name="web__add")
    assert McpExecutor().call(tool, {"a": 2, "b": 40}, ToolContext(1, "c", "k")) == {"result": 42.0}


def test_a_private_http_url_without_allowlist_is_refused_before_any_request(demo_data, settings):
    # A listening socket that records whether anything connected to it.
    settings.OUTBOUND_ALLOWLIST = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        server = McpServer.objects.create(name="internal", transport="http", url=f"http://127.0.0.1:{port}/mcp")
        result = mcp_server_discover(server=server)
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody came
    assert not result.ok and "OUTBOUND_ALLOWLIST" in result.error
    assert not Tool.objects.filter(name__startswith="internal__").exists()


def test_a_server_name_that_resolves_elsewhere_after_the_check_still_reaches_only_the_checked_address(
    demo_data, http_demo, settings, monkeypatch
):
    # DNS rebinding: the name answers with the allowlisted address to the check (made in the
    # caller's thread), and with an internal one to any later lookup (the SDK's event loop
    # resolves in a worker thread): 127.0.0.2 here, a listener that records whether anything came.
    _, port = http_demo
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{port}"]
    real_getaddrinfo = socket.getaddrinfo
    caller = threading.get_ident()

    def rebinding_getaddrinfo(host, *args, **kwargs):
        if host not in ("localhost", b"localhost"):  # anyio asks with bytes
            return real_getaddrinfo(host, *args, **kwargs)
        address = "127.0.0.1" if threading.get_ident() == caller else "127.0.0.2"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo)
    with socket.socket() as internal:
        internal.bind(("127.0.0.2", port))
        internal.listen()
        internal.settimeout(0.5)
        server = McpServer.objects.create(name="rebind", transport="http", url=f"http://localhost:{port}/mcp")
        assert mcp_server_discover(server=server).ok
        tool = Tool.objects.get(name="rebind__add")
        assert McpExecutor().call(tool, {"a": 1, "b": 2}, ToolContext(1, "c", "k")) == {"result": 3.0}
        with pytest.raises(TimeoutError):
            internal.accept()  # nobody came


# --- management command ----------------------------------------------------------------------------


def test_discover_command_prints_what_changed_and_fails_loudly(demo, capsys):
    call_command("discover_mcp_tools", "demo")
    out = capsys.readouterr().out
    assert "4 added" in out and "added: demo__restock" in out
    McpServer.objects.create(name="broken", command="/nonexistent/mcp-server")
    with pytest.raises(CommandError, match="discovery failed for broken"):
        call_command("discover_mcp_tools", "--all")
    assert "4 unchanged" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no MCP server named nope"):
        call_command("discover_mcp_tools", "nope")


# --- web UI ----------------------------------------------------------------------------------------


def test_admin_discovers_tools_with_the_button(demo, client):
    client.force_login(make_user("ada", "admins"))
    response = client.post(reverse("mcp_server_discover", args=[demo.pk]), follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "4 added" in page and "demo__restock" in page
    assert Tool.objects.filter(kind="mcp", mcp_server=demo).count() == 4


def test_admin_registers_a_server_and_a_bad_command_is_refused(demo_data, client):
    client.force_login(make_user("ada", "admins"))
    response = client.post(reverse("mcp_server_create"), {"name": "x", "transport": "stdio", "command": "'unclosed"})
    assert response.status_code == 200 and "Not a usable command" in response.content.decode()
    response = client.post(reverse("mcp_server_create"), {"name": "x", "transport": "stdio", "command": "demo-mcp --stdio", "enabled": "on"})
    server = McpServer.objects.get(name="x")
    assert response.status_code == 302 and server.argv() == ["demo-mcp", "--stdio"]


def test_viewer_may_list_servers_but_not_discover_or_edit(demo, client):
    client.force_login(make_user("victor", "viewers"))
    assert client.get(reverse("mcp_server_list")).status_code == 200
    assert client.post(reverse("mcp_server_discover", args=[demo.pk])).status_code == 403
    assert client.get(reverse("mcp_server_detail", args=[demo.pk])).status_code == 403
    assert client.get(reverse("mcp_server_create")).status_code == 403
    assert not Tool.objects.filter(kind="mcp").exists()


# --- through the agent loop -------------------------------------------------------------------------


def _call(name, arguments, call_id):
    return {"tool_calls": [{"name": name, "arguments": arguments, "id": call_id}]}


def _result(request, call_id):
    (message,) = [m for m in request["messages"] if m["role"] == "tool" and m["tool_call_id"] == call_id]
    return json.loads(message["content"])


def test_an_agent_calls_an_mcp_tool_and_the_model_reads_its_result(demo, launch, script):
    mcp_server_discover(server=demo)
    model = script(_call("demo__lookup_stock", {"sku": "SKU-1"}, "c1"), {"content": "12 in stock"})
    run = launch("how many SKU-1?", models=[model], tools=["demo__lookup_stock"], summarize_on_stop=False)
    assert run.status == Run.Status.SUCCEEDED
    first, second = script.requests(model)
    assert [t["function"]["name"] for t in first["tools"]] == ["demo__lookup_stock"]
    assert _result(second, "c1") == {"ok": True, "result": {"sku": "SKU-1", "quantity": 12}}


def test_invalid_arguments_never_reach_the_server_and_valid_ones_do_once(demo, launch, script, state_file):
    mcp_server_discover(server=demo)
    model = script(
        _call("demo__restock", {"sku": "SKU-2", "quantity": "lots"}, "c1"),
        _call("demo__restock", {"sku": "SKU-2", "quantity": 3}, "c2"),
        {"content": "restocked"},
    )
    launch("restock SKU-2", models=[model], tools=["demo__restock"], approval_policy="approve", summarize_on_stop=False)
    requests = script.requests(model)
    bad = _result(requests[1], "c1")
    assert bad["ok"] is False and "invalid arguments at quantity" in bad["error"]
    assert _result(requests[2], "c2") == {"ok": True, "result": {"sku": "SKU-2", "quantity": 3, "added": 3}}
    assert stock(state_file)["SKU-2"] == 3  # one restock: the invalid call never reached the server


def test_a_destructive_mcp_tool_waits_for_approval(demo, launch, script, state_file):
    mcp_server_discover(server=demo)
    model = script(_call("demo__restock", {"sku": "SKU-1", "quantity": 5}, "c1"), {"content": "done"})
    run = launch("restock SKU-1", models=[model], tools=["demo__restock"])
    assert run.status == Run.Status.AWAITING_APPROVAL
    assert ToolCall.objects.get(run=run, call_id="c1").status == ToolCall.Status.AWAITING_APPROVAL
    assert not state_file.exists()  # nothing ran


def test_an_mcp_error_result_reaches_the_model_as_an_error(demo, launch, script):
    mcp_server_discover(server=demo)
    model = script(_call("demo__flaky", {"fail": True}, "c1"), {"content": "it failed"})
    launch("try flaky", models=[model], tools=["demo__flaky"], summarize_on_stop=False)
    result = _result(script.requests(model)[1], "c1")
    assert result["ok"] is False and "the warehouse is on fire" in result["error"]


def test_the_idempotency_key_reaches_the_server_so_a_retried_call_changes_nothing(demo, state_file):
    mcp_server_discover(server=demo)
    tool = Tool.objects.get(name="demo__restock")
    arguments = {"sku": "SKU-3", "quantity": 2}
    first = McpExecutor().call(tool, arguments, ToolContext(run_id=1, call_id="c1", idempotency_key="key-1"))
    again = McpExecutor().call(tool, arguments, ToolContext(run_id=1, call_id="c1", idempotency_key="key-1"))
    other = McpExecutor().call(tool, arguments, ToolContext(run_id=1, call_id="c2", idempotency_key="key-2"))
    assert first == again == {"sku": "SKU-3", "quantity": 7, "added": 2}
    assert other["quantity"] == 9
