"""Daily rollups for the metrics page: what the runs created on a UTC day did, once they ended.

A run is counted here by the transaction that ends it (runs/services/rollups.py), so a day's rows
hold exactly its ended runs; runs still going are read from their own rows. `RollupDay` is a
day's lock and says whether the day's rows are complete (`built`): days built before the rollups
existed are read raw until `manage.py rebuild_rollups` builds them.
"""
from django.db import models

from runs.models.core import Agent


class RollupDay(models.Model):
    """One row per day with rollups: the row every change of the day's rollups locks first."""

    day = models.DateField(primary_key=True)
    built = models.BooleanField(default=False, help_text="Every ended run of the day is counted.")


class RunRollup(models.Model):
    """Ended runs created on `day`, by agent, status, stop reason and iterations."""

    day = models.DateField()
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=20)
    stop_reason = models.CharField(max_length=24, blank=True)
    iterations = models.PositiveIntegerField()
    runs = models.PositiveIntegerField(default=0)
    tokens = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "agent", "status", "stop_reason", "iterations"],
                                               name="unique_run_rollup")]


class StepRollup(models.Model):
    """Model calls of those runs, by model and latency bucket (see runs/services/rollups.py); a
    `whole_month` row (`day` the month's first) holds the sum of that month's day rows, so a year
    reads twelve months of buckets instead of 365 days of them."""

    day = models.DateField()
    whole_month = models.BooleanField(default=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=200)
    bucket = models.IntegerField()
    steps = models.IntegerField(default=0)  # not "positive": an upsert of a negative delta is checked as a new row

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "agent", "model", "bucket", "whole_month"],
                                               name="unique_step_rollup")]


class ToolRollup(models.Model):
    """Tool calls of those runs by tool: finished (succeeded, failed or rejected), failed, rejected."""

    day = models.DateField()
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    tool_name = models.CharField(max_length=200)
    finished = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "agent", "tool_name"], name="unique_tool_rollup")]
