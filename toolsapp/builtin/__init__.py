"""Built-in demo tools; importing the modules registers their handlers and verifiers."""
from . import orders, tickets, weather  # noqa: F401
