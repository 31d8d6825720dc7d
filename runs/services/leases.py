"""Keeping the leases of runs this process drives alive while they wait on a model or a tool.

A lease shorter than the slowest model call would let a second worker take over a run that is
merely waiting; a lease as long as that would leave a crashed worker's runs stranded for as
long. Instead leases stay short, and one thread per process renews those of its drivers, but
only up to the moment each driver said its wait should be over: a driver stuck past its own
timeouts stops being renewed, and the sweep hands its run to another worker.
"""
import logging
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(self):
        self._until: dict[str, float] = {}  # lease owner -> monotonic time to stop renewing
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def expect_wait(self, owner: str, seconds: float) -> None:
        with self._lock:
            self._until[owner] = time.monotonic() + seconds
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="lease-keeper", daemon=True)
                self._thread.start()

    def forget(self, owner: str) -> None:
        with self._lock:
            self._until.pop(owner, None)

    def _serve(self) -> None:
        from runs.models import Run

        while True:
            time.sleep(max(0.2, settings.RUN_LEASE_SECONDS / 3))
            now = time.monotonic()
            with self._lock:
                owners = [owner for owner, until in self._until.items() if until > now]
            if not owners:
                continue
            try:
                Run.objects.filter(lease_owner__in=owners).update(
                    lease_expires_at=timezone.now() + timedelta(seconds=settings.RUN_LEASE_SECONDS)
                )
            except Exception as exc:  # the database is away: the fenced writes will notice
                log.warning("could not renew leases: %s", exc)
            finally:
                connection.close()


keeper = LeaseKeeper()
