from django.apps import AppConfig


class MemoryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "memory"
    verbose_name = "Long-term memory"

    def ready(self):
        from memory.project_routes import register_routes

        register_routes()  # which project each route is about (projects/routes.py)
        # Registers the save_memory and search_memory handlers, in web and worker processes alike.
        from . import tools  # noqa: F401
