"""Verifiers: named checks of the system's real state when the model gives its final answer."""
from collections.abc import Callable

from toolsapp.executors.python import claim_name

Verifier = Callable[..., "tuple[bool, str]"]

VERIFIERS: dict[str, Verifier] = {}
VERIFIER_MODULES: dict[str, str] = {}  # name -> the module that registered it


def verifier(name: str):
    """Register a verifier, called as fn(run_id=..., answer=..., customer=...) -> (ok, reason)."""

    def register(fn: Verifier) -> Verifier:
        claim_name("Verifier", name, fn, VERIFIER_MODULES)
        VERIFIERS[name] = fn
        return fn

    return register
