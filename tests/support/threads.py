"""Run callables at the same moment in real threads, for the race tests."""
import threading

from django.db import connection


def together(*actions, timeout: float = 30) -> list:
    """Run the callables at once, each in a thread with its own database connection, after they
    meet at a barrier; what each returned, or the exception it raised, in order. Fails when a
    thread is still running after `timeout` seconds (a lock never released?)."""
    barrier = threading.Barrier(len(actions))
    results: list = [None] * len(actions)

    def run(index, action):
        try:
            barrier.wait(timeout=10)
            results[index] = action()
        except BaseException as exc:  # noqa: BLE001 (the assertions report it)
            results[index] = exc
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a thread hung (a lock never released?)"
    return results
