"""Fault matrix: more timeline events than the channel layer holds for a client that is not
reading (a slow browser tab). channels-redis drops what does not fit; the client, applying
events by sequence number as the live page does (static/js/run_live.js), notices the gap at the
next event, asks for a replay, and ends up with exactly what the database has; a reconnect
afterwards adds nothing and misses nothing."""

import threading

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection, transaction

from runs.engine.storage import events
from runs.models import Run, RunEvent
from tests.web.websockets.test_consumer_timeline import (
    TIMEOUT,
    communicator,
    publisher_flushed,
    record_committed,
    replay,
    stored,
)


class LivePage:
    """What run_live.js does with messages: apply strictly by seq, keep early ones, ask on a gap."""

    def __init__(self, ws, applied):
        self.ws, self.applied = ws, list(applied)
        self.waiting: dict[int, dict] = {}
        self.resume_in_flight = False
        self.live_received = 0  # live events that reached the client before its first replay
        self.resumes = 0

    @property
    def last(self) -> int:
        return self.applied[-1]["seq"] if self.applied else 0

    async def read_until(self, last_seq: int) -> None:
        while self.last < last_seq or self.resume_in_flight:
            message = await self.ws.receive_json_from(timeout=TIMEOUT)
            if message["type"] == "resumed":
                self.resume_in_flight = False
                continue
            if not self.resumes:
                self.live_received += 1  # live events, before any replay
            await self.offer(message)

    async def offer(self, event: dict) -> None:
        if event["seq"] <= self.last:
            return
        if event["seq"] != self.last + 1:
            self.waiting[event["seq"]] = event
            if not self.resume_in_flight:
                self.resume_in_flight, self.resumes = True, self.resumes + 1
                await self.ws.send_json_to({"type": "resume", "after": self.last})
            return
        self.applied.append(event)
        while self.last + 1 in self.waiting:
            self.applied.append(self.waiting.pop(self.last + 1))
        self.waiting = {seq: e for seq, e in self.waiting.items() if seq > self.last}


def burst(run_id: int, count: int) -> None:
    """`count` events committed at once, then published; returns when the publisher sent them all."""
    try:
        with transaction.atomic():
            first = Run.objects.select_for_update().get(pk=run_id).event_seq + 1
            Run.objects.filter(pk=run_id).update(event_seq=first + count - 1)
            events.events_store(
                run_id=run_id,
                first_seq=first,
                events=[("verification", {"ok": False, "reason": f"burst {i}"}) for i in range(count)],
            )
        while events._publisher.unsent > 0:
            threading.Event().wait(0.02)
    finally:
        connection.close()


def test_a_client_that_overflowed_the_channel_layer_ends_with_exactly_the_stored_timeline(finished_run, session_cookie):
    cookie = session_cookie("viewers")
    capacity = settings.CHANNEL_LAYERS["default"]["CONFIG"]["capacity"]
    count = capacity + 200

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        seen, _ = await replay(ws, 0)
        page = LivePage(ws, seen)
        # The client's event loop is blocked (a slow tab) while the worker publishes a burst.
        writer = threading.Thread(target=burst, args=(finished_run.pk, count))
        writer.start()
        writer.join()
        after_burst = page.last + count
        # The last events of the burst were dropped: nothing shows the gap until the next event.
        await page.read_until(page.last + min(count, capacity) - 1)
        nudge = await record_committed(finished_run.pk, data={"ok": False, "reason": "after the burst"})
        await page.read_until(nudge["seq"])
        await ws.disconnect()

        # A reconnect from the last applied seq brings nothing new and misses nothing.
        again = communicator(finished_run.pk, cookie)
        assert (await again.connect(timeout=TIMEOUT))[0]
        extra, end = await replay(again, page.last)
        await again.disconnect()
        return page, after_burst, nudge, extra, end

    page, after_burst, nudge, extra, end = async_to_sync(go)()
    async_to_sync(publisher_flushed)()

    assert nudge["seq"] == after_burst + 1
    print(
        f"burst of {count} events, capacity {capacity}: {page.live_received} reached the client live, {page.resumes} replay(s)"
    )
    assert page.live_received <= capacity + 2, "the layer held every event: the test did not overflow it"
    assert page.resumes >= 1
    assert page.applied == stored(finished_run.pk), "what the client shows is what the database has"
    assert (extra, end["last"]) == ([], RunEvent.objects.filter(run=finished_run).count())
