"""Rebuild the metrics page's daily rollups from the runs' rows, one day per transaction.

Safe while runs keep ending: each day is rebuilt under the lock a run's ending takes for its day
(see runs/observability/metrics/rollups.py), so every run is counted exactly once, with its approvals.
Run it after migration 0016 (approval, per-day and month rollups): until then every day is read
from the runs' own rows (exact, slower).
"""

from django.core.management.base import BaseCommand

from runs.observability.metrics import rollups


class Command(BaseCommand):
    help = "Rebuild the daily rollups of the metrics page (every day since the first run, or the last N days)."

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=None, help="Only the last N days, today included.")

    def handle(self, *args, days=None, verbosity=1, **options):
        if days is not None and days < 1:
            self.stderr.write("--days must be at least 1")
            return
        progress = (lambda day: self.stdout.write(f"rebuilt {day}")) if verbosity > 1 else None
        count = rollups.rebuild(days=days, progress=progress)
        self.stdout.write(f"Rebuilt the rollups of {count} days.")
