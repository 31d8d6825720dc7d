"""What every executor shares: the base class, where a kind of tool declares itself, the context
of a call and the expected error.

A kind of tool is one Executor subclass that sets `kind`: defining it registers it (see
toolsapp/executors/__init__.py, which imports every module of this package). Everything else
reads its declaration instead of naming kinds: the model's choices, the form's and the API's
fields, the services' checks, the detail page and the evidence's "outside content" marks.
"""
import logging
import traceback
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from toolsapp.sensitive import redact, sensitive_values

log = logging.getLogger(__name__)


class ToolError(Exception):
    """A handler's own, expected failure; its message goes back to the model."""


@dataclass(frozen=True)
class ToolContext:
    run_id: int
    call_id: str
    idempotency_key: str
    customer: str = ""
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigField:
    """One setting of a kind's tools: typed by its name in the tool form and the API, stored in
    `tool.config`. Text, or a URL (`url`): the form and the API check its shape, the kind's
    `config_errors` the rest."""

    name: str
    label: str  # the form's
    help_text: str  # the form's
    api_help_text: str  # the API schema's description
    max_length: int = 200  # the API's; the form's too, except for a URL (the form's URL field has none)
    url: bool = False


@dataclass(frozen=True)
class Discovery:
    """For kinds whose tools are made by discovery, not typed (MCP): what a person is told when
    they try to change what discovery decides."""

    added: str  # a tool typed with this kind, or changed to or from it
    keeps_name: str
    no_handler: str
    project: str  # the tool's project is its source's
    not_copied: str  # a copy into another project is refused ({tool}, {project})


# The kinds, by their stored value; filled as the executor modules are imported.
KINDS: dict[str, "Executor"] = {}


class Executor:
    """One kind of tools. `call` returns the result or raises ToolError; each kind implements
    `run` and declares what the rest of the project needs to know about it."""

    kind: ClassVar[str] = ""  # the value stored in Tool.kind (at most 16 characters); "" for a base class
    label: ClassVar[str] = ""  # in the kind menus, the list and the detail page
    order: ClassVar[int] = 100  # where it comes in the menus and the API's enum (the built-in ones first)
    config_fields: ClassVar[tuple[ConfigField, ...]] = ()
    # Its results hold content from outside this installation (the evidence marks values taken
    # from them), and its requests leave the host: they go through toolsapp.net's guard.
    reaches_outside: ClassVar[bool] = False
    discovery: ClassVar[Discovery | None] = None
    # The rows of the tool's page that show where it runs (the context has `tool`, `settings`:
    # its config fields as (label, value), and `server_link`).
    detail_template: ClassVar[str] = "toolsapp/kinds/_settings.html"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.kind:
            return
        first = KINDS.get(cls.kind)
        if first is not None and type(first).__qualname__ != cls.__qualname__:
            raise ImproperlyConfigured(f"tool kind {cls.kind!r} is declared by both {type(first).__qualname__} "
                                       f"and {cls.__qualname__}; rename one of them")
        names = {f.name for other in KINDS.values() if other.kind != cls.kind for f in other.config_fields}
        shared = names & {f.name for f in cls.config_fields}
        if shared:
            raise ImproperlyConfigured(f"tool kind {cls.kind!r} declares config fields another kind has: "
                                       f"{', '.join(sorted(shared))}")
        KINDS[cls.kind] = cls()

    # --- What the services check ------------------------------------------------------------

    def config_errors(self, config: dict) -> dict[str, str]:
        """What is wrong with a tool's stored config, by field; checked when it is saved and
        before each call."""
        return {}

    def config_from(self, typed: dict[str, str]) -> tuple[dict, dict[str, str]]:
        """(the config to store, its errors by field) for the config fields as typed (form or API)."""
        config = {name: (value or "").strip() for name, value in typed.items()}
        return {name: value for name, value in config.items() if value}, self.config_errors(config)

    def notices(self, tool) -> list[str]:
        """What is worth knowing after saving `tool` that does not stop it from being saved."""
        return []

    # --- Calls ------------------------------------------------------------------------------

    def call(self, tool, arguments: dict, context: ToolContext) -> Any:
        """Run the call. When the tool has sensitive fields, no failure leaves here holding their
        values: a handler's or a server's error text may quote the arguments, and it is recorded,
        shown to every viewer and logged."""
        secrets = sensitive_values(arguments, tool.sensitive_fields)
        if not secrets:
            return self.run(tool, arguments, context)
        try:
            return self.run(tool, arguments, context)
        except ToolError as exc:
            raise ToolError(redact(str(exc), secrets)) from None
        except Exception as exc:  # noqa: BLE001 - logged here, redacted, instead of by the caller
            text = redact("".join(traceback.format_exception(exc)), secrets)
            log.warning("tool %s raised %s (sensitive arguments blanked)\n%s", tool.name, type(exc).__name__, text)
            if isinstance(exc, DatabaseError):  # the caller drops the broken connection
                raise DatabaseError(f"{type(exc).__name__} (details logged, sensitive arguments blanked)") from None
            raise ToolError(f"the tool failed with an unexpected {type(exc).__name__}") from None

    def run(self, tool, arguments: dict, context: ToolContext) -> Any:
        raise NotImplementedError
