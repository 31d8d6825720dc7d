"""Verifiers: named checks of the system's real state when the model gives its final answer."""
from collections.abc import Callable

Verifier = Callable[..., "tuple[bool, str]"]

VERIFIERS: dict[str, Verifier] = {}


def verifier(name: str):
    """Register a verifier, called as fn(run_id=..., answer=..., customer=...) -> (ok, reason)."""

    def register(fn: Verifier) -> Verifier:
        VERIFIERS[name] = fn
        return fn

    return register
