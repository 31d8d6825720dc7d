"""Built-in demo tools; importing the modules registers their handlers and verifiers."""
from . import orders, results, tickets, weather  # noqa: F401
