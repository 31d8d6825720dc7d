"""A kind of tool is declared once, on its executor (toolsapp/executors/): its label, its settings
and their checks, whether its results come from outside, its rows on the tool's page. The model,
the services, the form, the API, the page and the evidence read the declaration."""
import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.urls import reverse

from runs.supervision.evidence.sources import reads_outside
from tests.support.approval_fixtures import make_user
from toolsapp.executors import (
    KINDS,
    ConfigField,
    Executor,
    ToolContext,
    ToolError,
    config_typed,
    executor_for,
    kind_choices,
)
from toolsapp.models import Tool
from toolsapp.services import ToolInvalid, tool_notices, tool_save, tool_validate

SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.fixture
def queue_kind():
    """A kind declared here, as a module of toolsapp/executors/ declares one: it sends the
    arguments to a named in-memory queue (its one setting)."""
    sent: list = []

    class QueueExecutor(Executor):
        kind, label = "queue", "In-memory queue"
        config_fields = (ConfigField("queue_name", "Queue name (queue tools)", help_text="Where calls go.",
                                     api_help_text="Queue tools: where calls go.", max_length=40),)

        def config_errors(self, config):
            name = config.get("queue_name") or ""
            return {} if name.isidentifier() else {"queue_name": "A queue tool needs a queue name of letters and _."}

        def notices(self, tool):
            return [] if sent else ["Nothing has been sent to this queue yet."]

        def run(self, tool, arguments, context):
            sent.append((tool.config["queue_name"], arguments))
            return {"queued": len(sent)}

    yield sent
    KINDS.pop("queue")


def test_the_kinds_their_labels_and_order_come_from_the_executors():
    # The built-in kinds first, in this order (the menus' and the API's enum); others after them.
    assert kind_choices()[:3] == [("python", "Python handler"), ("http", "HTTP endpoint"), ("mcp", "MCP server")]
    assert Tool(kind="http").get_kind_display() == "HTTP endpoint"
    assert Tool.Kind.values[:3] == ["python", "http", "mcp"]


def test_a_new_kind_needs_no_migration(db, queue_kind):
    # Tool.kind's choices are the registry's, read when needed: the migration names the function.
    assert "queue" in Tool.Kind.values
    call_command("makemigrations", "toolsapp", check=True, dry_run=True, verbosity=0)


def test_a_kind_declared_twice_or_a_setting_two_kinds_declare_stops_the_process(queue_kind):
    with pytest.raises(ImproperlyConfigured, match="'http' is declared by both HttpExecutor and OtherHttp"):
        type("OtherHttp", (Executor,), {"kind": "http", "label": "Another HTTP"})
    with pytest.raises(ImproperlyConfigured, match="declares config fields another kind has: url"):
        type("UrlKind", (Executor,), {"kind": "urls", "label": "URLs",
                                      "config_fields": (ConfigField("url", "URL", "", ""),)})
    assert "urls" not in KINDS


def test_the_services_check_and_store_a_new_kinds_settings_as_it_declares(db, queue_kind):
    with pytest.raises(ToolInvalid) as refused:
        tool_validate(tool=None, data={"name": "enqueue", "parameters": SCHEMA, "kind": "queue",
                                       "queue_name": "not a name"})
    assert refused.value.errors == {"queue_name": ["A queue tool needs a queue name of letters and _."]}
    tool = tool_save(data={"name": "enqueue", "parameters": SCHEMA, "kind": "queue", "queue_name": " jobs "})
    assert tool.config == {"queue_name": "jobs"}
    assert tool_notices(tool=tool) == ["Nothing has been sent to this queue yet."]
    # A setting of another kind is not this kind's: not stored, and shown empty.
    tool = tool_save(tool=tool, data={"url": "https://example.com/hook"})
    assert tool.config == {"queue_name": "jobs"}
    shown = config_typed(tool)
    assert (shown["queue_name"], shown["url"], shown["secret_env"]) == ("jobs", "", "")
    assert executor_for("queue").call(tool, {"a": 1}, ToolContext(run_id=1, call_id="c", idempotency_key="k")) == {"queued": 1}
    assert queue_kind == [("jobs", {"a": 1})]


def test_changing_the_kind_drops_the_settings_of_the_kind_it_was(db, queue_kind):
    tool = tool_save(data={"name": "enqueue", "parameters": SCHEMA, "kind": "queue", "queue_name": "jobs"})
    tool = tool_save(tool=tool, data={"kind": "python"})
    assert tool.config == {}
    with pytest.raises(ToolInvalid) as refused:
        tool_save(tool=tool, data={"kind": "queue"})  # its setting is needed again
    assert list(refused.value.errors) == ["queue_name"]


def test_an_unknown_kind_is_refused_and_cannot_run(db):
    with pytest.raises(ToolInvalid) as refused:
        tool_validate(tool=None, data={"name": "x", "parameters": SCHEMA, "kind": "grpc"})
    assert refused.value.errors["kind"] == ["'grpc' is not a kind of tool."]
    with pytest.raises(ToolError, match="tools of kind 'grpc' cannot be executed by this installation"):
        executor_for("grpc")


@pytest.mark.parametrize(("kind", "marked", "outside"), [
    ("python", False, False), ("python", True, True), ("http", False, True), ("mcp", False, True),
    (None, False, True),  # the tool is gone
    ("grpc", False, True),  # a kind this installation no longer has: a flag too many, never one too few
])
def test_results_count_as_outside_content_as_the_kind_declares(kind, marked, outside):
    assert reads_outside(kind, marked) is outside


def test_the_tool_page_shows_the_rows_its_kind_declares(client, demo_data, queue_kind):
    client.force_login(make_user("ada", "admins"))
    queued = tool_save(data={"name": "enqueue", "parameters": SCHEMA, "kind": "queue", "queue_name": "jobs"})
    page = client.get(reverse("tool_detail", args=[queued.pk])).content.decode()
    assert "<th>Queue name (queue tools)</th><td class=\"mono\">jobs</td>" in page
    assert "<th>Handler</th>" not in page
    assert 'id="tool-reads-outside">no' in page
    hook = tool_save(data={"name": "hook", "parameters": SCHEMA, "kind": "http", "url": "https://example.com/h"})
    page = client.get(reverse("tool_detail", args=[hook.pk])).content.decode()
    assert '<th>Handler</th><td class="mono">hook</td>' in page
    assert "every tool of kind “HTTP endpoint” counts" in page


def test_the_admin_lists_filters_and_edits_tools_by_the_declared_kinds(demo_data, client):
    client.force_login(User.objects.create_superuser("root", password="pw-root"))
    hook = tool_save(data={"name": "hook", "parameters": SCHEMA, "kind": "http", "url": "https://example.com/h"})
    page = client.get(reverse("admin:toolsapp_tool_changelist")).content.decode()
    assert "HTTP endpoint" in page and "Python handler" in page  # the column, and the filter's choices
    listed = client.get(reverse("admin:toolsapp_tool_changelist"), {"kind__exact": "http"}).content.decode()
    assert ">hook</a>" in listed and ">get_weather</a>" not in listed
    form = client.get(reverse("admin:toolsapp_tool_change", args=[hook.pk])).content.decode()
    assert 'name="url" value="https://example.com/h"' in form and 'value="mcp"' not in form
