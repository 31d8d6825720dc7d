"""A step's request replayed against other models: who asked, which models, what it spent.

A replay adds nothing to its run (no step, no counter), but it is spending: the budgets covering
the run count its tokens and cost (runs/controls/budgets.py), and the run page lists it."""
from django.conf import settings
from django.db import models

from runs.models.core import Run


class StepReplay(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="replays")
    step_index = models.PositiveIntegerField()
    # Who, as they were named then (the account may be renamed or deleted later).
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    user_name = models.CharField(max_length=150, blank=True)
    models_asked = models.JSONField(default=list)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # Empty while the models are asked; a replay whose process ended before they answered stays
    # empty (its spending is unknown and counts as nothing).
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["run", "-created_at"], name="step_replays_of_run")]

    def __str__(self):
        return f"run {self.run_id} step {self.step_index} replayed by {self.user_name or 'someone'}"

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out
