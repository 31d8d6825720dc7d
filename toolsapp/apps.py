from django.apps import AppConfig


class ToolsappConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "toolsapp"
    verbose_name = "Tools"

    def ready(self):
        from toolsapp.project_routes import register_routes

        register_routes()  # which project each route is about (projects/routes.py)
        # Registers the built-in handlers and verifiers, then those of the installed packages'
        # `agentsite.tools` entry points and of AGENTSITE_TOOL_MODULES (your own tools, without
        # editing this app), by importing their modules. Web and worker processes both get here
        # through django.setup(); a module that cannot be loaded stops the process (plugins.py).
        from django.conf import settings

        from . import builtin  # noqa: F401
        from .plugins import load_tool_modules

        load_tool_modules(settings.AGENTSITE_TOOL_MODULES)
