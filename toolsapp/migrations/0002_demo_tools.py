"""The built-in demo tools and the sample data they read (all in the database, not in code)."""
from decimal import Decimal

from django.db import migrations


def _obj(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city (sample data: Lagos and London).",
        "parameters": _obj({"city": {"type": "string", "minLength": 1, "description": "City name, e.g. Lagos"}}, ["city"]),
    },
    {
        "name": "search_tickets",
        "description": "Search support tickets by words in their title or body.",
        "parameters": _obj({"query": {"type": "string", "minLength": 1, "maxLength": 200}}, ["query"]),
    },
    {
        "name": "create_ticket",
        "description": 'Create a support ticket. The title must start with "[TEST] ". Idempotent.',
        "parameters": _obj(
            {
                "title": {"type": "string", "minLength": 1, "maxLength": 200},
                "body": {"type": "string", "maxLength": 5000},
                "priority": {"type": "string", "enum": ["low", "medium", "high"]},
            },
            ["title", "body", "priority"],
        ),
        "parallel_safe": False,
    },
    {
        "name": "get_ticket",
        "description": "Read one support ticket by its number.",
        "parameters": _obj({"ticket_id": {"type": "integer", "minimum": 1}}, ["ticket_id"]),
    },
    {
        "name": "lookup_order",
        "description": "Look up one of the current customer's orders.",
        "parameters": _obj({"order_id": {"type": "string", "pattern": "^ORD-[0-9]{1,10}$"}}, ["order_id"]),
    },
    {
        "name": "cancel_order",
        "description": "Cancel one of the current customer's orders. Destructive: an operator must approve.",
        "parameters": _obj(
            {
                "order_id": {"type": "string", "pattern": "^ORD-[0-9]{1,10}$"},
                "reason": {"type": "string", "minLength": 3, "maxLength": 500},
            },
            ["order_id", "reason"],
        ),
        "destructive": True,
        "parallel_safe": False,
    },
]


def create(apps, schema_editor):
    Tool = apps.get_model("toolsapp", "Tool")
    for spec in TOOLS:
        Tool.objects.update_or_create(name=spec["name"], defaults={**spec, "kind": "python", "handler": spec["name"]})
    WeatherReport = apps.get_model("toolsapp", "WeatherReport")
    WeatherReport.objects.get_or_create(city="Lagos", defaults={"temperature_c": 31, "conditions": "sunny"})
    WeatherReport.objects.get_or_create(city="London", defaults={"temperature_c": 12, "conditions": "light rain"})
    Order = apps.get_model("toolsapp", "Order")
    for order_id, customer, item, total, status in [
        ("ORD-1001", "acme", "Standing desk", "499.00", "open"),
        ("ORD-1002", "acme", "Monitor arm", "89.90", "shipped"),
        ("ORD-1003", "acme", "Desk lamp", "35.00", "open"),
        ("ORD-2001", "globex", "Office chair", "249.00", "open"),
    ]:
        Order.objects.get_or_create(
            order_id=order_id, defaults={"customer": customer, "item": item, "total": Decimal(total), "status": status}
        )


class Migration(migrations.Migration):
    dependencies = [("toolsapp", "0001_initial")]
    operations = [migrations.RunPython(create, migrations.RunPython.noop)]
