"""Tools from installed packages: the modules that register Python handlers and verifiers.

Every process (web, worker, manage.py) imports them at start, from toolsapp's AppConfig.ready:
the modules named by the `agentsite.tools` entry points of the installed packages, then those
listed in AGENTSITE_TOOL_MODULES. A module that is missing or raises on import stops the process
there, with an error naming it: a run that asks for a tool nobody loaded would otherwise fail
much later, in one worker and not another.
"""
from collections.abc import Iterable
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points

from django.core.exceptions import ImproperlyConfigured

ENTRY_POINT_GROUP = "agentsite.tools"
SETTING = "AGENTSITE_TOOL_MODULES"


def _entry_point_source(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    package = f" of package {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {ep.name} = {ep.value!r}{package} (group {ep.group})"


def _failure(module: str, source: str, exc: BaseException) -> ImproperlyConfigured:
    return ImproperlyConfigured(
        f"Tool module {module!r} ({source}) could not be loaded: {type(exc).__name__}: {exc}"
    )


def load_tool_modules(modules: Iterable[str] = (), *, from_entry_points: Iterable[EntryPoint] | None = None) -> list[str]:
    """Import the tool modules of the entry points and of `modules`; returns what was loaded.

    from_entry_points defaults to the installed packages' `agentsite.tools` entry points.
    Raises ImproperlyConfigured naming the module (and its entry point or setting) on the
    first one that cannot be imported, and on a handler or verifier name two modules register.
    """
    if from_entry_points is None:
        from_entry_points = entry_points(group=ENTRY_POINT_GROUP)
    loaded: list[str] = []
    for ep in from_entry_points:
        try:
            ep.load()  # imports the module (value "module" or "module:attribute")
        except Exception as exc:
            raise _failure(ep.module, _entry_point_source(ep), exc) from exc
        loaded.append(ep.module)
    for module in modules:
        try:
            import_module(module)
        except Exception as exc:
            raise _failure(module, f"named in {SETTING}", exc) from exc
        loaded.append(module)
    return list(dict.fromkeys(loaded))
