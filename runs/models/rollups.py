"""Daily rollups for the metrics page: what the runs created on a UTC day did, once they ended.

A run's ending marks it uncounted (`UncountedRun`, in the transaction that ends it), and a
counter adds the uncounted runs to these rows in batches soon after (runs/observability/metrics/rollups.py);
so a day's rows hold exactly its counted runs, and the runs still going or not yet counted are read
from their own rows. `RollupDay` is a day's lock and says whether the day's rows are complete
(`built`): days built before the rollups existed are read raw until `manage.py rebuild_rollups`
builds them.

A run's approvals are counted with it: once it has ended none of them changes any more (its
ending expires those still pending, in the ending's transaction), so the approvals of runs still
going are read from their own rows like the runs.
"""

from django.db import models

from runs.models.core import Agent


class UncountedRun(models.Model):
    """An ended run not yet added to the rollups: written by the transaction that ends it, deleted
    by the one that counts it (or rebuilds its day). The metrics page reads these runs from their
    own rows, so every figure stays exact while they wait; there are only a few at any moment."""

    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, primary_key=True, related_name="+")

    def __str__(self) -> str:
        return f"run {self.run_id}, not counted yet"


class RollupDay(models.Model):
    """One row per day with rollups: the row every change of the day's rollups locks first."""

    day = models.DateField(primary_key=True)
    built = models.BooleanField(default=False, help_text="Every ended run of the day is counted.")
    # The declared totals its FigureRollup rows hold (runs/observability/metrics/figures.py): a day
    # counted before a total was declared lacks it, so it is read raw until it is rebuilt.
    totals = models.TextField(blank=True, default="", help_text="The totals the day's rows were counted with.")


class RunRollup(models.Model):
    """Ended runs created on `day`, by agent, status, stop reason and iterations; `whole_month` rows
    as in StepRollup (a day holds hundreds of these rows: a year reads twelve months of them)."""

    day = models.DateField()
    whole_month = models.BooleanField(default=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=20)
    stop_reason = models.CharField(max_length=24, blank=True)
    iterations = models.PositiveIntegerField()
    runs = models.IntegerField(default=0)  # not "positive": see StepRollup.steps
    tokens = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "agent", "status", "stop_reason", "iterations", "whole_month"],
                name="unique_run_rollup_month",
            )
        ]


class DayRollup(models.Model):
    """Ended runs created on `day` by agent, whatever their outcome: the page's runs, tokens and cost per day."""

    day = models.DateField()
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    runs = models.IntegerField(default=0)
    tokens = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "agent"], name="unique_day_rollup")]


class StepRollup(models.Model):
    """Model calls of those runs, by model and latency bucket (see runs/observability/metrics/rollups.py); a
    `whole_month` row (`day` the month's first) holds the sum of that month's day rows, so a year
    reads twelve months of buckets instead of 365 days of them."""

    day = models.DateField()
    whole_month = models.BooleanField(default=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=200)
    bucket = models.IntegerField()
    steps = models.IntegerField(default=0)  # not "positive": an upsert of a negative delta is checked as a new row

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "agent", "model", "bucket", "whole_month"], name="unique_step_rollup"
            )
        ]


class AllAgentsStepRollup(models.Model):
    """StepRollup summed over agents, written with it (rollup_rows.steps_add): the page for every
    agent reads a window's latency buckets from here, one row per (day, model, bucket) instead of
    one per agent as well (30 days of five agents at a million runs: 55,500 rows summed to 21,500 at
    each request, 45 ms; here the 21,500 rows, already summed, about 10 ms)."""

    day = models.DateField()
    whole_month = models.BooleanField(default=False)
    model = models.CharField(max_length=200)
    bucket = models.IntegerField()
    steps = models.IntegerField(default=0)  # not "positive": see StepRollup.steps

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "model", "bucket", "whole_month"], name="unique_all_agents_step_rollup"
            )
        ]


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


class ApprovalRollup(models.Model):
    """Approvals of those runs by status, what decided them (automatic, by a grant), rule and tool:
    every count of the page's approvals and supervision parts."""

    day = models.DateField()
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10)
    automatic = models.BooleanField()
    granted = models.BooleanField()
    rule_name = models.CharField(max_length=200, blank=True)
    rule_version = models.PositiveIntegerField(null=True)  # rows are found under the day's lock, never upserted
    tool_name = models.CharField(max_length=200)
    approvals = models.IntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["day", "agent"], name="approval_rollup_day")]


class WaitRollup(models.Model):
    """People's decisions of those runs by rule name, tool and wait bucket (the latency buckets of
    StepRollup, over seconds); `whole_month` rows as in StepRollup."""

    day = models.DateField()
    whole_month = models.BooleanField(default=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    rule_name = models.CharField(max_length=200, blank=True)
    tool_name = models.CharField(max_length=200)
    bucket = models.IntegerField()
    decisions = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "agent", "rule_name", "tool_name", "bucket", "whole_month"], name="unique_wait_rollup"
            )
        ]


class ApprovalWait(models.Model):
    """The exact wait of each person's decision of those runs, found by its bucket: a percentile's
    bucket comes from WaitRollup's counts, its exact value from the few rows of that bucket."""

    approval_id = models.BigIntegerField(primary_key=True)  # no foreign key: deleted with its run's rollups
    day = models.DateField()
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    rule_name = models.CharField(max_length=200, blank=True)
    tool_name = models.CharField(max_length=200)
    bucket = models.IntegerField()
    wait = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["bucket", "day"], name="approval_wait_bucket_day")]


class FigureRollup(models.Model):
    """The declared totals of those runs (runs/observability/metrics/figures.py), by agent: one row
    per (day, agent, total), `whole_month` rows as in StepRollup. A figure declared later adds rows,
    not columns: no migration."""

    day = models.DateField()
    whole_month = models.BooleanField(default=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64)
    value = models.FloatField(default=0.0)  # counts too: exact up to 2**53

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["day", "agent", "name", "whole_month"], name="unique_figure_rollup")
        ]
