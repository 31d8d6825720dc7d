"""The built-in tools of long runs: reading an earlier result again (what compaction summarised)
and the agent's long-term memory (saving a fact goes to a person by default)."""
from django.db import migrations


def _obj(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


TOOLS = [
    {
        "name": "read_tool_result",
        "description": (
            "Read again the full result of an earlier tool call of this run, by its call id. "
            "Use it when an earlier result was summarised to keep the conversation short."
        ),
        "parameters": _obj({
            "call_id": {"type": "string", "minLength": 1, "maxLength": 200},
            "step": {"type": "integer", "minimum": 1, "description": "The step that made the call, as the summary says."},
        }, ["call_id"]),
    },
    {
        "name": "save_memory",
        "description": (
            "Save one short fact to this agent's long-term memory (for the current customer), "
            "for later runs to find with search_memory. A person approves each fact."
        ),
        "parameters": _obj({"text": {"type": "string", "minLength": 3, "maxLength": 1000}}, ["text"]),
        # A saved fact steers every later run for the customer: a person reads it first.
        "destructive": True,
        "parallel_safe": False,
    },
    {
        "name": "search_memory",
        "description": "Search the facts this agent saved earlier (for the current customer) by words.",
        "parameters": _obj({"query": {"type": "string", "minLength": 1, "maxLength": 200}}, ["query"]),
    },
]


def create(apps, schema_editor):
    Tool = apps.get_model("toolsapp", "Tool")
    for spec in TOOLS:
        # An installation that already has a tool of that name keeps its own.
        Tool.objects.get_or_create(name=spec["name"], defaults={**spec, "kind": "python", "handler": spec["name"]})


class Migration(migrations.Migration):
    dependencies = [("toolsapp", "0007_tool_always_ask_critical_edits")]
    operations = [migrations.RunPython(create, migrations.RunPython.noop)]
