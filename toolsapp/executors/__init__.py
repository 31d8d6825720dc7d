"""The kinds of tools, one executor each (Python, HTTP, MCP, ...), side by side.

A kind is declared once, on its executor class (toolsapp/executors/base.py says what it
declares), in a module of this package: importing the package imports every module in it, so a
new kind is a new module here and nothing else in the code. The model's choices, the tool form,
the services' checks, the API, the detail page and the evidence read the declarations through
the functions below. Executors never import toolsapp.models: the model reads its choices here.

`executor_for(tool.kind)` is the only lookup the loop needs.
"""
import pkgutil
from importlib import import_module

from toolsapp.executors.base import KINDS, ConfigField, Discovery, Executor, ToolContext, ToolError

__all__ = [
    "EXECUTORS", "ConfigField", "Discovery", "Executor", "ToolContext", "ToolError", "config_fields",
    "config_typed", "discovery_of", "executor_for", "kind_choices", "kind_of", "outside_kinds", "reaches_outside",
]

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base"):
    import_module(f"{__name__}.{_module}")

EXECUTORS: dict[str, Executor] = KINDS  # kept under its old name


def _ordered() -> list[Executor]:
    return sorted(KINDS.values(), key=lambda executor: (executor.order, executor.kind))


def kind_choices() -> list[tuple[str, str]]:
    """Tool.kind's choices: every kind's (value, label). A callable, so that a new kind changes
    no migration (Django stores the reference to it, not the list)."""
    return [(executor.kind, executor.label) for executor in _ordered()]


def kind_of(kind: str | None) -> Executor | None:
    """The declaration of `kind`; None for a kind this installation does not have."""
    return KINDS.get(kind) if isinstance(kind, str) else None


def discovery_of(kind: str | None) -> Discovery | None:
    """What discovery decides for tools of `kind` (MCP's); None for a kind whose tools are typed."""
    executor = kind_of(kind)
    return executor.discovery if executor else None


def executor_for(kind: str) -> Executor:
    executor = kind_of(kind)
    if executor is None:
        raise ToolError(f"tools of kind {kind!r} cannot be executed by this installation")
    return executor


def config_fields() -> list[ConfigField]:
    """Every kind's config fields, in the kinds' order (the form's and the API's order)."""
    return [setting for executor in _ordered() for setting in executor.config_fields]


def config_typed(tool) -> dict[str, str]:
    """The config fields as the form and the API show them for `tool`: its kind's from its config,
    the other kinds' empty."""
    executor = kind_of(tool.kind)
    own = {setting.name for setting in executor.config_fields} if executor else set()
    config = tool.config or {}
    return {setting.name: (config.get(setting.name, "") if setting.name in own else "") for setting in config_fields()}


def outside_kinds() -> tuple[str, ...]:
    """The kinds whose results hold content from outside (runs/supervision/evidence marks them)."""
    return tuple(executor.kind for executor in _ordered() if executor.reaches_outside)


def reaches_outside(kind: str | None) -> bool:
    """Whether results of a tool of `kind` count as outside content: a kind that says so, or one
    that is unknown (no tool, or a kind this installation no longer has): a flag too many, never
    one too few."""
    executor = kind_of(kind)
    return executor is None or executor.reaches_outside
