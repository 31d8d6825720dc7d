"""The threads tool handlers run in, and a bound on the ones that hang.

A handler that outlives its timeout cannot be stopped (Python cannot kill a thread), so its
caller gives up on it. In a plain pool each such handler would keep one of the pool's threads
for as long as it hangs, and a few hung calls would leave no thread for anybody else's calls:
every other run's calls would wait in the queue and time out without running.

Here a thread whose call was given up is replaced at once, so `size` threads always serve live
work; the abandoned thread ends when its handler finally returns. Each tool (`key`) may have at
most `max_hung` abandoned calls still running in this process; beyond that its new calls are
refused at once (ToolBusy) instead of piling up more threads, and other tools are unaffected.
One model answer's parallel calls are all accepted before any of them can time out, so a
tool's hung calls are bounded by `max_hung` plus one answer's calls.
"""
import queue
import threading
from concurrent.futures import Future

from django.db import connections

# What `abandon` found: the call never started, it finished after all, or it is left running.
CANCELLED, DONE, ABANDONED = "cancelled", "done", "abandoned"


class ToolBusy(Exception):
    """A tool already has too many calls running past their timeout in this process."""

    def __init__(self, hung: int):
        super().__init__(hung)
        self.hung = hung


class _Job:
    __slots__ = ("key", "fn", "args", "future", "abandoned")

    def __init__(self, key: str, fn, args: tuple):
        self.key, self.fn, self.args = key, fn, args
        self.future: Future = Future()
        self.abandoned = False


class ToolThreads:
    def __init__(self, *, size: int, max_hung: int, name: str = "tool"):
        self.size, self.max_hung, self.name = size, max_hung, name
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # threads serving the queue (abandoned ones no longer count)
        self._idle = 0  # of those, how many wait for a job nobody has claimed yet
        self._hung: dict[str, int] = {}
        self._jobs: dict[Future, _Job] = {}  # running or queued

    def hung(self, key: str) -> int:
        with self._lock:
            return self._hung.get(key, 0)

    def submit(self, key: str, fn, *args) -> Future:
        """Run fn(*args) in a thread; ToolBusy when `key` has too many hung calls."""
        job = _Job(key, fn, args)
        with self._lock:
            hung = self._hung.get(key, 0)
            if hung >= self.max_hung:
                raise ToolBusy(hung)
            self._jobs[job.future] = job
            if self._idle:
                self._idle -= 1
            elif self._threads < self.size:
                self._start()
            self._queue.put(job)
        return job.future

    def abandon(self, future: Future) -> str:
        """The caller stops waiting for `future`: CANCELLED (it never started), DONE (it finished
        meanwhile) or ABANDONED (still running: its thread is replaced and counts as hung)."""
        with self._lock:
            if future.cancel():
                self._jobs.pop(future, None)
                return CANCELLED
            job = self._jobs.get(future)
            if future.done() or job is None:
                return DONE
            job.abandoned = True
            self._hung[job.key] = self._hung.get(job.key, 0) + 1
            self._threads -= 1
            self._start()
            return ABANDONED

    def _start(self) -> None:
        # Called with the lock held.
        self._threads += 1
        threading.Thread(target=self._serve, name=f"{self.name}-{id(self)}-{self._threads}", daemon=True).start()

    def _serve(self) -> None:
        try:
            while True:
                job = self._queue.get()
                if job.future.set_running_or_notify_cancel():
                    try:
                        job.future.set_result(job.fn(*job.args))
                    except BaseException as exc:  # the caller reads it from the future
                        job.future.set_exception(exc)
                with self._lock:
                    self._jobs.pop(job.future, None)
                    if job.abandoned:
                        # Replaced when it was given up: this thread's work is over.
                        left = self._hung[job.key] - 1
                        if left:
                            self._hung[job.key] = left
                        else:
                            del self._hung[job.key]
                        return
                    self._idle += 1
        finally:
            connections.close_all()  # this thread's own connections
