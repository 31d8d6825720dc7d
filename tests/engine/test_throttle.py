"""Working slots: a worker process lets only a few of its runs work at once (runs/engine/throttle.py)."""
import threading
import time

import pytest

from runs.engine import throttle


@pytest.fixture
def slots(settings):
    def use(n):
        settings.RUN_WORKING_SLOTS = n
        throttle._free_slots = None

    yield use
    throttle._free_slots = None


def _most_working_at_once(threads: int) -> int:
    """Start `threads` threads that each work a little inside a slot; the most seen at once."""
    lock, state = threading.Lock(), {"now": 0, "most": 0}

    def body():
        with throttle.working():
            with lock:
                state["now"] += 1
                state["most"] = max(state["most"], state["now"])
            time.sleep(0.05)
            with lock:
                state["now"] -= 1

    # Daemon threads: a lost slot fails the assertion instead of hanging the test process.
    started = [threading.Thread(target=body, daemon=True) for _ in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join(10)
    return state["most"]


def test_no_more_threads_work_at_once_than_there_are_slots(slots):
    slots(2)
    assert _most_working_at_once(6) == 2


def test_a_waiting_thread_gives_its_slot_to_another(slots):
    slots(1)
    other_worked = threading.Event()

    def other():
        with throttle.working():
            other_worked.set()

    with throttle.working():
        thread = threading.Thread(target=other, daemon=True)
        with throttle.waiting():
            thread.start()
            assert other_worked.wait(5)
        thread.join(5)


def test_a_nested_working_block_keeps_the_slot_it_has(slots):
    slots(1)
    done = threading.Event()

    def nested():
        with throttle.working():
            with throttle.working():  # would wait forever for its own slot otherwise
                pass
            with throttle.waiting():
                pass
        done.set()

    threading.Thread(target=nested, daemon=True).start()
    assert done.wait(5)
    # Exactly one slot again: none lost, none added by the nested exits.
    assert _most_working_at_once(3) == 1


def test_waiting_without_a_slot_does_not_create_one(slots):
    slots(1)
    with throttle.waiting():  # e.g. a summary asked for outside a worker's run
        pass
    assert _most_working_at_once(3) == 1
