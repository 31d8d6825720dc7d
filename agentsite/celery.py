import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

app = Celery("agentsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _check_redis(sender, **kwargs):
    # A Redis that may evict keys can silently drop queued runs: say so at startup.
    from django.conf import settings

    from agentsite.processes import redis_eviction_warning

    warning = redis_eviction_warning(settings.CELERY_BROKER_URL)
    if warning:
        import logging

        logging.getLogger("agentsite").warning(warning)
