from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.lifecycle.housekeeping import runs_prune


class Command(BaseCommand):
    help = "Delete (optionally archive first) finished runs older than N days; their approvals are kept as archived decisions."

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=settings.RUN_RETENTION_DAYS)
        parser.add_argument("--archive-dir", help="Write the runs as JSON Lines here before deleting")

    def handle(self, *args, **options):
        if options["days"] < 1:
            raise CommandError("--days must be at least 1", returncode=2)
        deleted = runs_prune(days=options["days"], archive_dir=options["archive_dir"])
        self.stdout.write(f"deleted {deleted} runs older than {options['days']} days")
