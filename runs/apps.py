from django.apps import AppConfig


class RunsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runs"
    verbose_name = "Runs"

    def ready(self):
        # Services queue tasks by name (runs.engine.dispatch); Celery only discovers task
        # modules on its own when a worker starts, so web processes register them here.
        from runs import tasks  # noqa: F401
