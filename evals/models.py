"""Datasets of cases made from real runs (or by hand), experiments that run every case of a
dataset against one version of an agent, and each case's result there."""
from django.conf import settings
from django.db import models

from projects.models import InProject
from runs.models import Run


class Dataset(InProject, models.Model):
    name = models.CharField(max_length=100, unique=True)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="+",
        help_text="The team whose cases these are; its experiments run this project's agents.",
    )
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [("run_experiment", "Can start and cancel experiments")]

    def __str__(self):
        return self.name


class Case(models.Model):
    """One task to run, and the checks its run must pass (evals/expectations.py says their form)."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="cases")
    name = models.CharField(max_length=200)
    task = models.TextField()
    customer = models.CharField(max_length=100, blank=True)
    messages = models.JSONField(
        default=list, blank=True,
        help_text="The conversation after the task that the case starts from (a run's, up to one of its steps).",
    )
    expectations = models.JSONField(default=list, blank=True)
    # Where it came from, and its answered calls copied from there: in an experiment, a simulated
    # call the same as one of these gets its recorded answer (runs/engine/tools/simulation.py).
    source_run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    answers = models.JSONField(default=list, blank=True,
                               help_text="The source run's answered calls (tool, canonical arguments, result, text).")
    source_step = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["dataset", "pk"]

    def __str__(self):
        return self.name


class Experiment(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        CANCELLED = "cancelled", "Cancelled"

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="experiments")
    agent = models.ForeignKey("runs.Agent", on_delete=models.PROTECT, related_name="+")
    agent_version = models.PositiveIntegerField(help_text="The agent's version every case ran with.")
    draft = models.BooleanField(default=False, help_text="The version was a draft (not current) when it ran.")
    overrides = models.JSONField(default=dict, blank=True, help_text="Models or limits changed for this experiment.")
    label = models.CharField(max_length=200, help_text="What ran, in words: version, draft, model.")
    left_out_tools = models.JSONField(default=list, blank=True, help_text="The version's tools that were gone.")
    baseline = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                 help_text="The experiment it is compared with by default.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    cases_total = models.PositiveIntegerField(default=0)
    cases_done = models.PositiveIntegerField(default=0)
    cases_passed = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-pk"]

    def __str__(self):
        return f"Experiment {self.pk}: {self.label}"

    @property
    def cases_failed(self) -> int:
        return self.cases_done - self.cases_passed

    @property
    def pass_rate(self) -> float | None:
        return self.cases_passed / self.cases_done if self.cases_done else None


class CaseResult(models.Model):
    """A case's run in an experiment and what its checks found. The run's figures are copied here,
    so the scorecard outlives the pruning of old runs."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SCORED = "scored", "Scored"

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(Case, null=True, blank=True, on_delete=models.SET_NULL, related_name="results")
    case_name = models.CharField(max_length=200)
    run = models.OneToOneField("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="case_result")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    passed = models.BooleanField(null=True)
    expectations = models.JSONField(default=list, blank=True, help_text="The case's checks when the experiment started.")
    checks = models.JSONField(default=list, blank=True, help_text="Each check: what it wanted, what was seen, ok.")
    simulated = models.JSONField(default=list, blank=True,
                                 help_text="Each simulated call: where its answer came from, what would have decided it.")
    stop_reason = models.CharField(max_length=24, blank=True)
    iterations = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    seconds = models.FloatField(default=0.0)
    scored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["experiment", "pk"]
        constraints = [models.UniqueConstraint(fields=["experiment", "case"], name="unique_case_result")]

    def __str__(self):
        return f"{self.case_name} in experiment {self.experiment_id}"

    @property
    def stop_reason_label(self) -> str:
        return Run.StopReason(self.stop_reason).label if self.stop_reason in Run.StopReason.values else self.stop_reason
