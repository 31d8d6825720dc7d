"""Which project the memories' routes are about: their agent's (projects/routes.py)."""
from projects.routes import register, values
from runs.models import Agent


def register_routes() -> None:
    register(dict.fromkeys(["agent_memories", "memory_edit", "memory_delete"],
                           values(Agent, "project_id", pk="agent_id")))
