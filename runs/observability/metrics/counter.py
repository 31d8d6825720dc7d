"""When ended runs are added to the daily rollups: soon after they end, in batches, off the loop.

Counting a run in the transaction that ended it cost a worker more than a third of a short run's
CPU (about a dozen statements per run) and made every ending of a day wait for that day's lock.
Now the ending only marks the run (`mark_uncounted`) and wakes this process's counter: a
daemon thread that waits ROLLUP_COUNT_DELAY_SECONDS for more endings to gather, then counts every
marked run, a batch of them per transaction (rollups.count_uncounted). With a delay of 0 the run
is counted at once by the thread that ended it, right after its commit (the tests do this).

Nothing is lost when a process dies with runs marked: any later wake in any process counts every
marked run, and the periodic sweep counts those left over. The metrics page reads marked runs
from their own rows meanwhile, so no figure waits for the counter.
"""
import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from runs.models import Run, UncountedRun
from runs.observability.metrics.rollups import COUNT_BATCH, count_uncounted

log = logging.getLogger("runs.rollups")

_wakes = threading.Event()
_thread: threading.Thread | None = None
_start_lock = threading.Lock()


def mark_uncounted(*, run: Run, fields: dict) -> None:
    """The engine's run_ended hook: `run` ends in this transaction with its new `fields`; mark it
    uncounted (one INSERT, no lock of its day: endings never wait for each other here), and have
    the counter add it to the rollups once this commits."""
    if fields.get("status", run.status) not in Run.FINISHED_STATUSES or run.experiment:
        return  # an experiment's run is counted nowhere (the evals app scores it)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {UncountedRun._meta.db_table} (run_id) VALUES (%s) ON CONFLICT DO NOTHING", [run.pk])
    transaction.on_commit(wake)


def wake() -> None:
    """A run was marked uncounted (called after the commit that marked it)."""
    if settings.ROLLUP_COUNT_DELAY_SECONDS <= 0:
        count_all()
        return
    global _thread
    if _thread is None or not _thread.is_alive():
        with _start_lock:
            if _thread is None or not _thread.is_alive():
                _thread = threading.Thread(target=_serve, name="rollup-counter", daemon=True)
                _thread.start()
    _wakes.set()


def count_all() -> int:
    """Count every marked run, a batch per transaction; how many. Never raises: a run left marked
    is counted by the next wake or sweep, and the page reads it raw until then."""
    counted = 0
    try:
        while True:
            batch = count_uncounted()
            counted += batch
            if batch < COUNT_BATCH:
                return counted
    except Exception as exc:  # noqa: BLE001 - the database may be away; the next wake tries again
        log.warning("could not count ended runs into the rollups: %s", exc)
        return counted


def count_left_over() -> int:
    """The sweep's part: count the marked runs that ended a while ago (their process died before
    its counter ran, or the database was away then); how many."""
    waited = timezone.now() - timedelta(seconds=max(0.0, settings.ROLLUP_COUNT_DELAY_SECONDS) + LEFT_OVER_AFTER_SECONDS)
    if not UncountedRun.objects.filter(run__finished_at__lt=waited).exists():
        return 0
    return count_all()


# A mark older than the delay plus this is left over: no counter is about to take it.
LEFT_OVER_AFTER_SECONDS = 10.0


def _serve() -> None:
    while True:
        _wakes.wait()
        # Let the endings of the next moment gather: one transaction counts them all.
        threading.Event().wait(settings.ROLLUP_COUNT_DELAY_SECONDS)
        _wakes.clear()
        try:
            count_all()
        finally:
            connection.close()  # a pooled connection goes back; SQLite's is reopened next time
