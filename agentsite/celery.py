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

    from hosting.processes import redis_eviction_warning

    warning = redis_eviction_warning(settings.CELERY_BROKER_URL)
    if warning:
        import logging

        logging.getLogger("agentsite").warning(warning)
    site_warning = site_url_warning(settings)
    if site_warning:
        import logging

        logging.getLogger("agentsite").warning(site_warning)


def site_url_warning(settings) -> str | None:
    """Links in escalation e-mails and webhooks that would open nothing: say so at start."""
    if settings.SITE_URL_IS_SET:
        return None
    return (f"SITE_URL is not set: links in e-mails and webhooks point at {settings.SITE_URL}, which only works on "
            "this machine; set SITE_URL to the address people open (manage.py up sets it from --host/--port)")
