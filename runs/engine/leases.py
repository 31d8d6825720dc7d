"""Leases: which worker drives a run, and keeping them alive while a driver waits.

A worker drives a run only while it holds the run's lease (`lease_claim`, one conditional
UPDATE), and every write of the driver is fenced by it (`fenced_update`): a worker that lost its
lease to another writes nothing more.

A lease shorter than the slowest model call would let a second worker take over a run that is
merely waiting; a lease as long as that would leave a crashed worker's runs stranded for as
long. Instead leases stay short, and one thread per process renews those of its drivers, but
only up to the moment each driver said its wait should be over: a driver stuck past its own
timeouts stops being renewed, and the sweep hands its run to another worker.
"""
import functools
import json
import logging
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from runs.engine.storage.db import on_fresh_connection, thread_connection
from runs.models import OperatorMessage, Run

log = logging.getLogger("runs.services.leases")  # its name from before the move: operators filter on it


class LeaseLost(Exception):
    """Another worker took this run over; stop without writing anything more."""


def lease_claim(run_id: int, owner: str, seconds: float | None = None) -> bool:
    """Atomically take the run if nobody holds a live lease on it (on a new connection when the
    one it had was lost; a claim whose connection died as it committed counts)."""
    return on_fresh_connection(
        lambda: _claim(run_id, owner, seconds) or Run.objects.filter(pk=run_id, lease_owner=owner).exists(),
        what="lease_claim",
    )


def _claim(run_id: int, owner: str, seconds: float | None) -> bool:
    now = timezone.now()
    until = now + timedelta(seconds=seconds or settings.RUN_LEASE_SECONDS)
    # One plain statement (once per run a driver takes: the ORM's query building cost more than
    # it): a free run is taken; a lease that ran out belongs to a worker that died (or hung), and
    # taking it over is counted.
    table, statuses = Run._meta.db_table, list(Run.ACTIVE_STATUSES)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET lease_owner = %s, lease_expires_at = %s, "
            "takeovers = takeovers + CASE WHEN lease_owner = '' THEN 0 ELSE 1 END "
            f"WHERE id = %s AND status IN ({', '.join(['%s'] * len(statuses))}) "
            "AND (lease_owner = '' OR lease_expires_at < %s)",
            [owner, until, run_id, *statuses, now],
        )
        return cursor.rowcount == 1


def lease_release(run_id: int, owner: str) -> None:
    """Free the run; on a new connection when the last one died (with the driver that used it),
    or the run would wait out a lease nobody holds before another worker may take it. When the
    database stays away, the lease runs out and the sweep hands the run out: nothing is raised
    (this runs in `finally` blocks, where it would hide the error that ended the work)."""
    try:
        on_fresh_connection(lambda: _release(run_id, owner), what="lease_release")
    except Exception as exc:  # noqa: BLE001 - logged; the lease runs out instead
        log.warning(json.dumps({"event": "lease_not_released", "run": run_id, "error": str(exc)[:200]}))


def _release(run_id: int, owner: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Run._meta.db_table} SET lease_owner = %s, lease_expires_at = NULL WHERE id = %s AND lease_owner = %s",
            ["", run_id, owner],
        )


@contextmanager
def lease_held(run_id: int, purpose: str):
    """The run's lease for one piece of work done outside a driver (a cancel, an operator's lever):
    yields its owner, or None when someone else holds it (a driver, which acts on the operator's
    flags at its next boundary). Released, and no longer renewed, when the block ends."""
    owner = f"{purpose}-{run_id}-{uuid.uuid4().hex[:12]}"
    if not lease_claim(run_id, owner):
        yield None
        return
    try:
        yield owner
    finally:
        keeper.forget(owner)
        lease_release(run_id, owner)


# The operators' flags every fenced write reads back (a new lever with a flag of its own adds it
# here, and the loop reads it at its boundaries): (column, how its value is read).
LEVER_FLAGS = (
    ("cancel_requested", bool),
    ("pause_requested", bool),
    ("paused_by_name", str),
    ("stop_requested_by_name", str),
)


@functools.cache
def _flag_columns() -> str:
    # Built once per process: the fenced write runs several times per iteration of every run.
    return ", ".join(connection.ops.quote_name(Run._meta.get_field(name).column) for name, _kind in LEVER_FLAGS)


def fenced_update(run: Run, owner: str, *, events: int = 0, lease_seconds: float | None = None, **fields) -> int:
    """Write run fields only while `owner` still holds the lease: the fence against a second worker.

    One statement also renews the lease, takes `events` sequence numbers and reads the operators'
    flags (cancel, pause, stop with a summary, and whether notes wait to be sent), because this
    runs several times per iteration: the driver learns of a lever without a statement of its own.
    Returns the last sequence number taken.

    `lease_seconds`: how long the driver is about to need the run (e.g. a tool's timeout). The
    lease itself stays RUN_LEASE_SECONDS and the keeper renews it for that long, so a worker that
    dies meanwhile frees the run within one short lease, not after the longest timeout.
    """
    if fields.get("lease_owner") == "":  # the write that lets go of the run (a pause)
        fields["lease_expires_at"] = None
    else:
        fields["lease_expires_at"] = timezone.now() + timedelta(seconds=settings.RUN_LEASE_SECONDS)
    conn = thread_connection()
    quote = conn.ops.quote_name
    sets, params = [], []
    for name, value in fields.items():
        field = Run._meta.get_field(name)
        sets.append(f"{quote(field.column)} = %s")
        params.append(field.get_db_prep_save(value, conn))
    sql = (
        f"UPDATE {Run._meta.db_table} SET {', '.join(sets)}, event_seq = event_seq + %s "
        f"WHERE id = %s AND lease_owner = %s RETURNING event_seq, {_flag_columns()}, "
        f"EXISTS (SELECT 1 FROM {OperatorMessage._meta.db_table} "
        f"WHERE run_id = {Run._meta.db_table}.id AND step_id IS NULL)"
    )
    with conn.cursor() as cursor:
        cursor.execute(sql, [*params, events, run.pk, owner])
        row = cursor.fetchone()
    if row is None:
        raise LeaseLost(run.pk)
    for name, value in fields.items():
        setattr(run, name, value)
    run.event_seq = row[0]
    for (name, kind), value in zip(LEVER_FLAGS, row[1:-1]):
        setattr(run, name, kind(value))
    run.notes_waiting = bool(row[-1])  # not a column: read by the loop before its next request
    if lease_seconds and lease_seconds > settings.RUN_LEASE_SECONDS:
        keeper.expect_wait(owner, lease_seconds)
    return row[0]


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
