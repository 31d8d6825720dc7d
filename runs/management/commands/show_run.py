from django.core.management.base import BaseCommand, CommandError

from runs.management.commands.run_agent import render
from runs.models import Run


class Command(BaseCommand):
    help = "Print a run, whatever its state, in the format of run_agent."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        run = Run.objects.filter(pk=options["run_id"]).first()
        if run is None:
            raise CommandError(f"no run {options['run_id']}", returncode=2)
        self.stdout.write(render(run, as_json=options["json"]))
