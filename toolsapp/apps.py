from django.apps import AppConfig


class ToolsappConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "toolsapp"
    verbose_name = "Tools"

    def ready(self):
        # Registers the built-in handlers and verifiers, and those of TOOL_MODULES (your own
        # tools, without editing this app), by importing their modules.
        from importlib import import_module

        from django.conf import settings

        from . import builtin  # noqa: F401

        for module in settings.TOOL_MODULES:
            import_module(module)
