from django.apps import AppConfig


class ToolsappConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "toolsapp"
    verbose_name = "Tools"

    def ready(self):
        # Registers the built-in handlers and verifiers by importing their modules.
        from . import builtin  # noqa: F401
