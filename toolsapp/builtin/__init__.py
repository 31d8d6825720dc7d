"""Built-in demo tools; importing the modules registers their handlers and verifiers."""
from . import orders, results, tickets, weather  # noqa: F401

# The tools of an agent's long-term memory (their handlers are the memory app's; rows: migration 0008).
MEMORY_TOOLS = ("save_memory", "search_memory")
