from django.apps import AppConfig
from django.db.models.signals import pre_delete


class RunsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runs"
    verbose_name = "Runs"

    def ready(self):
        from runs.web.project_routes import register_routes

        register_routes()  # which project each route is about (projects/routes.py)
        # Services queue tasks by name (runs.engine.dispatch); Celery only discovers task
        # modules on its own when a worker starts, so web processes register them here.
        from runs import tasks  # noqa: F401
        from runs.controls import budgets
        from runs.engine import hooks
        from runs.lifecycle import run_search
        from runs.observability.metrics import counter, rollups
        from runs.observability.tracing import run_spans
        from runs.supervision.approvals import gate

        # The engine imports neither supervision nor observability: they plug in here
        # (runs/engine/hooks.py says when each is called). A later listener subscribes here too.
        hooks.register_gate(gate.approval_gate)
        hooks.register_budgets(budgets.Budgets)
        hooks.subscribe("run_ending", gate.approvals_close)
        hooks.subscribe("run_ended", run_search.index_ended_run)
        hooks.subscribe("run_ended", counter.mark_uncounted)
        hooks.subscribe("summary_added", run_search.index_summary)
        hooks.subscribe("summary_added", rollups.count_summary)
        hooks.subscribe("records_committed", run_spans.export_after_commit)
        # An agent's latency rollups leave the sums over agents with it (see the function).
        pre_delete.connect(rollups.forget_agent_steps, sender="runs.Agent", dispatch_uid="forget_agent_steps")
