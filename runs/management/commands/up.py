import os
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from hosting import processes


class Command(BaseCommand):
    help = "Run the whole system: Redis (embedded if none), migrations, web server, worker and scheduler."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--concurrency", type=int, default=int(os.environ.get("WORKER_CONCURRENCY", "50")),
                            help="Runs one worker holds in flight (threads)")
        parser.add_argument("--no-worker", action="store_true", help="Web server only (workers run elsewhere)")

    def handle(self, *args, **options):
        supervisor = processes.Supervisor()
        redis_url = os.environ.get("REDIS_URL", "")
        if not redis_url:
            redis_url = "redis://127.0.0.1:6379/0"
            if processes.port_open("127.0.0.1", 6379):
                self.stdout.write("using the Redis already answering on 127.0.0.1:6379")
            else:
                self.stdout.write("no Redis configured or running: starting an embedded one (data in var/redis)")
                supervisor.adopt("redis", processes.start_embedded_redis(settings.DATA_DIR / "redis"))
        warning = processes.redis_eviction_warning(redis_url)
        if warning:
            self.stderr.write(f"WARNING: {warning}")
        call_command("migrate", verbosity=0)
        # The stylesheets and scripts WhiteNoise serves (new or changed ones since the last start).
        call_command("collectstatic", interactive=False, verbosity=0)
        password = processes.ensure_admin()
        site = {}
        if not os.environ.get("SITE_URL"):
            # Links in e-mails and webhooks must open this server, not the default's 127.0.0.1:8000.
            site["SITE_URL"] = processes.site_url_for(options["host"], options["port"])
        # The demo model answers at a hosted model's pace here, so its runs can be watched live
        # (DEMO_MODEL_PACE=instant ./start for answers at once).
        pace = {} if os.environ.get("DEMO_MODEL_PACE") else {"DEMO_MODEL_PACE": "realistic"}
        env = processes.child_env(REDIS_URL=redis_url, **site, **pace)
        py = sys.executable
        supervisor.start(
            "web", [py, "-m", "daphne", "-b", options["host"], "-p", str(options["port"]), "agentsite.asgi:application"], env
        )
        if not options["no_worker"]:
            supervisor.start(
                "worker",
                [
                    py, "-m", "celery", "-A", "agentsite", "worker", "--pool", "threads",
                    "--concurrency", str(options["concurrency"]), "--loglevel", "INFO",
                    # Gossip and mingle are not used, and they crash the worker when Redis restarts.
                    "--without-gossip", "--without-mingle",
                    "-B", "--schedule", str(settings.DATA_DIR / "celerybeat-schedule"),
                ],
                env,
            )
        url = f"http://{options['host']}:{options['port']}/"
        self.stdout.write("")
        self.stdout.write(f"Dashboard: {url}")
        if site:
            self.stdout.write(f"Links in notifications: {site['SITE_URL']} (SITE_URL is unset; set it if people open "
                              "this server at another address)")
        if password:
            self.stdout.write(f"Admin login (shown once, change it after signing in): admin / {password}")
        if not settings.LLM_API_KEY and not settings.LLM_BASE_URL:
            self.stdout.write(
                "Model: the offline demo model (a scripted server, NOT a language model). "
                "Set LLM_BASE_URL / LLM_API_KEY / LLM_MODELS for a real one."
            )
        self.stdout.write("Ctrl-C stops everything.\n")
        raise SystemExit(supervisor.wait())
