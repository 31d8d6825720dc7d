"""Spending budgets over a day or a month, for the whole site, one agent or one person who
launches: a run that would pass one pauses at its next boundary and asks, instead of dying.

A budget counts what the metrics page counts (runs/controls/budgets.py has the one definition).
A raise lifts a budget's limit until a time, for every run or for one; a hold is a run waiting on
a spent budget (paused between iterations, or queued before its start) until a raise, the turn of
the period, or an operator's stop."""
from django.conf import settings
from django.db import models

from projects.models import InProject
from runs.models.core import Agent, Run


class Budget(InProject, models.Model):
    class Scope(models.TextChoices):
        SITE = "site", "Every run of its project"
        AGENT = "agent", "One agent's runs"
        PERSON = "person", "Runs one person launches"

    class Measure(models.TextChoices):
        COST = "cost", "Cost (USD)"
        TOKENS = "tokens", "Tokens"
        RUNS = "runs", "Runs started"

    class Period(models.TextChoices):
        DAY = "day", "a day"
        MONTH = "month", "a month"

    name = models.CharField(max_length=100, help_text='Said when it is reached: "Budget reached: Billing, $50 a day".')
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="+",
        help_text="It counts this project's runs only.",
    )
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.SITE)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="budgets")
    person = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="budgets")
    measure = models.CharField(max_length=8, choices=Measure.choices, default=Measure.COST)
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.DAY)
    limit = models.FloatField(help_text="How much the period may use: dollars, tokens or runs.")
    alert_share = models.FloatField(default=0.8, help_text="Warn by webhook and e-mail once this share is used.")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.CheckConstraint(condition=models.Q(limit__gte=0), name="budget_limit_not_negative"),
            models.CheckConstraint(condition=models.Q(alert_share__gt=0, alert_share__lte=1),
                                   name="budget_alert_share_a_share"),
        ]

    def __str__(self):
        return self.name


class BudgetRaise(models.Model):
    """A budget's limit lifted to `limit` until `until`: for one run, or for every run (run empty)."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="raises")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="budget_raises")
    limit = models.FloatField()
    until = models.DateTimeField()
    by_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"{self.budget} to {self.limit} until {self.until:%Y-%m-%d %H:%M}"


class BudgetHold(models.Model):
    """A run waiting on a spent budget: paused at a boundary, or queued before it started. Its
    budget is empty once deleted (the sweep then lets the run go on)."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="budget_hold")
    budget = models.ForeignKey(Budget, null=True, on_delete=models.SET_NULL, related_name="holds")
    sentence = models.CharField(max_length=300)
    since = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["since", "pk"]

    def __str__(self):
        return f"run {self.run_id}: {self.sentence}"


class BudgetNotice(models.Model):
    """A budget's warning at its alert share, sent once per period (the unique constraint makes
    concurrent checks harmless)."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="notices")
    period_start = models.DateTimeField()
    used = models.FloatField()
    limit = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["budget", "period_start"], name="one_budget_notice_a_period")]
