"""Timeline events: stored with a per-run sequence number, then pushed to websocket clients.

The database is the truth: an event is written in the same transaction as the change it
describes, and published only after that commits. Publishing is best effort (a client that
misses one asks for it again by sequence number), so it never slows or breaks the loop.
"""

import asyncio
import atexit
import datetime
import logging
import queue
import threading
import time

from channels_redis.core import RedisChannelLayer
from django.db import connection, transaction

from runs.engine.storage.inserts import insert
from runs.models import Run, RunEvent

log = logging.getLogger("runs.services.events")  # its name from before the move: operators filter on it

APPROVALS_GROUP = "approvals"
# A publisher that has just been woken several times running waits this long for more events to
# send with the next one. Every wake of its event loop costs CPU the loop's threads then lack
# (0.6-1 ms a message when it woke per message, 200 concurrent runs); batching for 25 ms under
# load cut that by about a third.
PUBLISH_LINGER_SECONDS = 0.025
# Wakes that may send at once, without lingering: a publisher that rested gets them back, one per
# PUBLISH_LINGER_SECONDS of rest, so a quiet system sends each event the moment it commits while
# a busy one (never resting) lingers and batches as before.
PUBLISH_WAKE_BURST = 4
# A group the publisher found without members is remembered this long, so that messages nobody
# could see (a streaming answer's progress) are not even queued: see unwatched_lately.
UNWATCHED_MEMORY_SECONDS = 1.0
_unwatched_at: dict[str, float] = {}  # group -> when the publisher last found it empty (its thread writes)


def publish_pace(*, tokens: float, rested: float) -> tuple[bool, float]:
    """(send at once?, tokens left) for a wake after `rested` seconds with nothing to send."""
    tokens = min(PUBLISH_WAKE_BURST, tokens + rested / PUBLISH_LINGER_SECONDS)
    if tokens >= 1:
        return True, tokens - 1
    return False, tokens


def event_at(moment) -> str:
    """When an event was stored, as the live message and the replay both send it (UTC, ms)."""
    return moment.astimezone(datetime.UTC).isoformat(timespec="milliseconds")


def event_record(*, run_id: int, kind: str, data: dict) -> RunEvent:
    """Store one event; call inside the transaction that makes the change it reports."""
    with connection.cursor() as cursor:
        # One statement takes the next number and locks the run row until commit, so
        # concurrent writers of the same run get distinct, gap-free numbers.
        cursor.execute(
            f"UPDATE {Run._meta.db_table} SET event_seq = event_seq + 1 WHERE id = %s RETURNING event_seq", [run_id]
        )
        (seq,) = cursor.fetchone()
    return events_store(run_id=run_id, first_seq=seq, events=[(kind, data)])[0]


def events_store(*, run_id: int, first_seq: int, events: list[tuple[str, dict]]) -> list[RunEvent]:
    """Store events numbered first_seq, first_seq + 1, ... in one statement, whose numbers the
    caller already took (event_record, loop._fenced_update); publish them after commit."""
    stored = [RunEvent(run_id=run_id, seq=first_seq + i, kind=kind, data=data) for i, (kind, data) in enumerate(events)]
    insert(stored)
    if stored:
        messages = [
            {"type": "run.event", "run_id": run_id, "seq": e.seq, "kind": e.kind, "data": e.data, "at": event_at(e.created_at)}
            for e in stored
        ]
        transaction.on_commit(lambda: publish_many(f"run-{run_id}", messages))
    return stored


def approvals_changed(*, run_id: int) -> None:
    """Tell every open approval queue and header badge to refresh."""
    transaction.on_commit(lambda: publish(APPROVALS_GROUP, {"type": "approvals.changed", "run_id": run_id}))


class _Publisher:
    """A daemon thread with its own event loop, so group_send reuses one Redis connection pool.

    layer, clock and linger are the channel layer (default: the project's), time.monotonic and a
    wait of PUBLISH_LINGER_SECONDS; tests pass their own to watch when it lingers.
    """

    def __init__(self, *, layer=None, clock=time.monotonic, linger=None):
        self.queue: queue.SimpleQueue = queue.SimpleQueue()  # lists of (group, message), one per publish
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.unsent = 0  # submitted and not sent yet (under self.lock)
        self.exiting = threading.Event()
        self.layer, self.clock = layer, clock
        self.linger = linger or (lambda seconds: self.exiting.wait(seconds))

    def submit(self, items: list[tuple[str, dict]]) -> None:
        if self.thread is None or not self.thread.is_alive():
            with self.lock:
                if self.thread is None or not self.thread.is_alive():
                    self.thread = threading.Thread(target=self._serve, name="event-publisher", daemon=True)
                    self.thread.start()
                    atexit.register(self.flush)
        with self.lock:
            self.unsent += len(items)
        # One item per commit: its events go out in one batch, whatever the thread does meanwhile.
        self.queue.put(items)

    def flush(self, timeout: float = 2.0) -> None:
        """Send what is queued without waiting for more; at exit, so that a process that ends
        right after a commit (run_agent, a worker shutting down) does not take its events along."""
        self.exiting.set()
        deadline = time.monotonic() + timeout
        while self.unsent > 0 and time.monotonic() < deadline and self.thread is not None and self.thread.is_alive():
            time.sleep(0.005)

    def _serve(self):
        # A plain blocking get in a daemon thread: an executor thread here would keep the
        # process from exiting.
        from channels.layers import get_channel_layer

        layer = self.layer or get_channel_layer()
        loop = asyncio.new_event_loop()
        tokens = float(PUBLISH_WAKE_BURST)
        while True:
            try:
                batch, rested = list(self.queue.get_nowait()), 0.0
            except queue.Empty:
                idle_since = self.clock()
                batch = list(self.queue.get())
                rested = self.clock() - idle_since
            at_once, tokens = publish_pace(tokens=tokens, rested=rested)
            if not at_once:
                self.linger(PUBLISH_LINGER_SECONDS)
            # Everything queued meanwhile goes out in one turn of the event loop: under load,
            # starting the loop once per message cost more than the sends.
            while len(batch) < 500:
                try:
                    batch.extend(self.queue.get_nowait())
                except queue.Empty:
                    break
            try:
                if layer is not None:
                    loop.run_until_complete(self._send(layer, batch))
            finally:
                with self.lock:
                    self.unsent -= len(batch)

    @staticmethod
    async def _send(layer, batch):
        # In order within a group (a client applies events by sequence number, and asks for a
        # gap it sees); groups are independent of each other.
        by_group: dict[str, list[dict]] = {}
        for group, message in batch:
            by_group.setdefault(group, []).append(message)
        listened = await _groups_with_members(layer, list(by_group))
        now = time.monotonic()
        for group in by_group:
            if group in listened:
                _unwatched_at.pop(group, None)
            else:
                _unwatched_at[group] = now
        if len(_unwatched_at) > 4096:  # every run a worker ever published to: keep only the recent ones
            for group, at in list(_unwatched_at.items()):
                if now - at >= UNWATCHED_MEMORY_SECONDS:
                    _unwatched_at.pop(group, None)

        connections = asyncio.Semaphore(8)  # each concurrent send holds a Redis connection

        async def send_group(group, messages):
            async with connections:
                for message in messages:
                    try:
                        await layer.group_send(group, message)
                    except Exception as exc:  # Redis down: the client replays from the database later
                        log.debug("could not publish to %s: %s", group, exc)
                        return

        await asyncio.gather(*(send_group(g, m) for g, m in by_group.items() if g in listened))


async def _groups_with_members(layer, groups: list[str]) -> set[str]:
    """The groups that someone has joined, asked in one round trip per Redis host.

    Most runs have nobody watching their timeline, and a group_send costs two Redis commands
    even to an empty group (about a millisecond of a busy worker's CPU each). A client that
    joins just after this check misses the live message, as it would have missed one sent just
    before it joined: both consumers join their group before they accept the socket, and the
    client then reads what it missed (the timeline resumes from the database by sequence
    number, the approval queue reloads), so nobody misses an event for good. A host that cannot
    be asked counts as listened to: group_send then tries, and fails, on its own. Other layers
    get every message.
    """
    if not isinstance(layer, RedisChannelLayer):
        return set(groups)
    by_host: dict[int, list[str]] = {}
    for group in groups:
        by_host.setdefault(layer.consistent_hash(group), []).append(group)
    listened = set()
    for index, names in by_host.items():
        try:
            async with layer.connection(index).pipeline(transaction=False) as pipe:
                for name in names:
                    # channels-redis 4.3 (pinned) keeps a group's members in this sorted set;
                    # test_consumer_approvals fails if that changes.
                    pipe.zcard(layer._group_key(name))
                counts = await pipe.execute()
        except Exception as exc:
            log.debug("could not read the members of %d groups: %s", len(names), exc)
            listened.update(names)
            continue
        listened.update(name for name, count in zip(names, counts) if count)
    return listened


_publisher = _Publisher()


def unwatched_lately(group: str) -> bool:
    """Whether the publisher found nobody in `group` within UNWATCHED_MEMORY_SECONDS. Progress that
    is only worth seeing live (a streamed answer) is not queued for such a group: a page that
    opens meanwhile gets the next progress message at most that much later."""
    at = _unwatched_at.get(group)
    if at is None:
        return False
    if time.monotonic() - at < UNWATCHED_MEMORY_SECONDS:
        return True
    _unwatched_at.pop(group, None)
    return False


def publish(group: str, message: dict) -> None:
    publish_many(group, [message])


def publish_many(group: str, messages: list[dict]) -> None:
    _publisher.submit([(group, m) for m in messages])
