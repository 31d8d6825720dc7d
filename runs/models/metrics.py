from django.db import models


class PrunedTotals(models.Model):
    """What deleted runs had added to one family of /metrics' counters, kept so the counters never
    go down when old runs are pruned: /metrics adds these to what the remaining rows count.

    Written in the transaction that deletes the runs (runs/lifecycle/archive.py), so a run is
    either still counted from its rows or from here, never both or neither.
    """

    family = models.CharField(max_length=64, unique=True)
    # [[labels, value], ...] for counters; [[labels, cumulative, count, total, rows, extra], ...]
    # for histograms (runs/observability/prometheus/counters.py).
    data = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"pruned totals of {self.family}"
