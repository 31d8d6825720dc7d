from django.apps import AppConfig


class EvalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "evals"
    verbose_name = "Datasets and experiments"

    def ready(self):
        from evals.project_routes import register_routes

        register_routes()  # which project each route is about (projects/routes.py)
        # An experiment's case is scored once its run ends (the engine's run_ended hook); the
        # task module is imported so web processes can queue its tasks by name.
        from evals import scoring, tasks  # noqa: F401
        from runs.engine import hooks

        hooks.subscribe("run_ended", scoring.case_run_ended)
