from django.db import migrations


def create(apps, schema_editor):
    Agent = apps.get_model("runs", "Agent")
    Tool = apps.get_model("toolsapp", "Tool")
    agent, _ = Agent.objects.get_or_create(
        name="demo",
        defaults={
            "description": "Uses every built-in demo tool. Works with the offline demo model or a real one.",
            "system_prompt": (
                "You are a support assistant for the customer's account. Use the tools to look things up "
                "and act; never invent ids. Answer briefly once you are done."
            ),
            "max_iterations": 10,
            "summarize_on_stop": True,
        },
    )
    agent.tools.set(Tool.objects.filter(name__in=[
        "get_weather", "search_tickets", "create_ticket", "get_ticket", "lookup_order", "cancel_order",
    ]))


class Migration(migrations.Migration):
    dependencies = [("runs", "0001_initial"), ("toolsapp", "0002_demo_tools")]
    operations = [migrations.RunPython(create, migrations.RunPython.noop)]
