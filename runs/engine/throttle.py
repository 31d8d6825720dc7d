"""How many runs of one worker process work at the same moment.

A worker holds many runs in flight, one thread each, and nearly all of them are waiting on a
model or a tool at any moment. But replies come in bursts, and a hundred threads working at
once spend CPU passing the GIL around instead of working. So a driver works only while it
holds one of RUN_WORKING_SLOTS slots and gives it back whenever it waits; the runs in flight
are still bounded only by the worker's threads. Measured with bench/concurrent_runs.py (2
processes x 100 threads, zero model latency): 94-98 iterations/s with 4 slots, 75-80 without.
"""
import queue
import threading
from contextlib import contextmanager

from django.conf import settings

from runs.engine.storage.db import release_db_connection

# The free slots, as tokens in a queue: SimpleQueue is written in C, so taking and giving back a
# slot (twice an iteration, by hundreds of threads) costs no Python-level lock and condition, as
# threading.Semaphore's does (~4 % of a busy worker's CPU, py-spy at 200 runs in flight).
_free_slots: queue.SimpleQueue | None = None
_create_lock = threading.Lock()
_held = threading.local()


def _slots() -> queue.SimpleQueue:
    global _free_slots
    if _free_slots is None:
        with _create_lock:
            if _free_slots is None:
                slots = queue.SimpleQueue()
                for _ in range(settings.RUN_WORKING_SLOTS):
                    slots.put(True)
                _free_slots = slots
    return _free_slots


def _acquire() -> None:
    # Never queue for a slot holding a pooled connection: the slot holders may need it.
    release_db_connection()
    _slots().get()
    _held.slot = True


def _release() -> None:
    _held.slot = False
    _slots().put(True)


@contextmanager
def working():
    """Hold a slot for the duration (re-entrant: a nested call keeps the slot it has)."""
    if getattr(_held, "slot", False):
        yield
        return
    _acquire()
    try:
        yield
    finally:
        if getattr(_held, "slot", False):
            _release()


@contextmanager
def waiting():
    """Hand back this thread's pooled connection and its slot (if it has one) while it waits on I/O."""
    release_db_connection()
    if not getattr(_held, "slot", False):
        yield
        return
    _release()
    try:
        yield
    finally:
        _acquire()
