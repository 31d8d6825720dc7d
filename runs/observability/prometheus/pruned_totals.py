"""Keep /metrics' counters from going down when runs are deleted.

Counters are counted from the rows of runs, model calls and tool calls (runs/observability/prometheus/counters.py);
deleting old runs would take their share away, and Prometheus reads a counter that went down as
a reset (every rate() over it would spike). So whatever deletes runs first adds their share to
PrunedTotals, in its own transaction: either the runs are still there, or their share is.
"""
from collections.abc import Iterable

from runs.models import PrunedTotals
from runs.observability.prometheus import decision_counters
from runs.observability.prometheus.counters import PRUNED_FAMILIES, decode, encode, merge

# Every family of counted rows, each a function of the runs' ids giving what they count.
FAMILIES = {**PRUNED_FAMILIES, **decision_counters.PRUNED_FAMILIES}


def pruned_totals_add(*, run_ids: Iterable[int]) -> None:
    """Call inside the transaction that deletes these runs, before it deletes them."""
    run_ids = list(run_ids)
    for family, figures in FAMILIES.items():
        found = figures(run_ids)
        if not found:
            continue
        # Locked: two deletions at once (the prune and an administrator) add up, not overwrite.
        row, _ = PrunedTotals.objects.select_for_update().get_or_create(family=family)
        row.data = encode(merge(decode(row.data) + found))
        row.save(update_fields=["data", "updated_at"])
