"""The live timeline of one run over a websocket.

Protocol: the client sends {"type": "resume", "after": N}; the server answers with the stored
events with seq > N, in order, read from the database (the channel layer may drop messages,
the database does not), then {"type": "resumed", "last": <seq of the last one sent, or N>},
with "more": true when it stopped at RUN_TIMELINE_RESUME_EVENTS events (the client then asks
again after "last").
Live events arrive in the same shape, {"type": "event", "seq", "kind", "data"}, and may repeat
or overtake replayed ones: the client applies them strictly by seq.

One connection may resume RUN_TIMELINE_RESUMES_PER_WINDOW times per RESUME_WINDOW_SECONDS; past
that it gets {"type": "error", "message", "retry_after": <seconds>} and nothing is read, so a
client cannot make the server read a long run's events over and over.
"""
import time
from collections import deque

from channels.db import database_sync_to_async
from django.conf import settings

from runs.consumers.frames import BoundedJsonConsumer
from runs.roles import PERM_VIEW
from runs.selectors.runs import EVENT_BATCH, run_events_after, run_group_name
from runs.services.guards import MAX_SAFE_INTEGER


@database_sync_to_async
def _may_view(user) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(PERM_VIEW))


@database_sync_to_async
def _group_of(run_id: int) -> str | None:
    return run_group_name(run_id=run_id)


@database_sync_to_async
def _events_after(run_id: int, after: int, limit: int) -> list[dict]:
    return run_events_after(run_id=run_id, after=after, limit=limit)


RESUME_WINDOW_SECONDS = 10


class RunTimelineConsumer(BoundedJsonConsumer):
    run_id: int | None = None
    group: str | None = None
    resumed_at: deque[float]

    async def connect(self):
        if not await _may_view(self.scope.get("user")):
            await self.close()
            return
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        group = await _group_of(run_id)
        if group is None:
            await self.close()
            return
        self.run_id, self.group = run_id, group
        self.resumed_at = deque()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        if not isinstance(content, dict) or content.get("type") != "resume":
            await self.send_json({"type": "error", "message": 'expected {"type": "resume", "after": <seq>}'})
            return
        after = content.get("after")
        if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= MAX_SAFE_INTEGER:
            await self.send_json({"type": "error", "message": "after must be a non-negative integer"})
            return
        retry_after = self._resume_refused_for()
        if retry_after:
            await self.send_json({"type": "error", "message": "too many resumes: ask again later", "retry_after": retry_after})
            return
        # Live events that arrive meanwhile wait: a consumer handles one message at a time.
        budget = max(settings.RUN_TIMELINE_RESUME_EVENTS, 1)
        reply = {"type": "resumed", "last": after}
        while True:
            asked = min(EVENT_BATCH, budget)
            events = await _events_after(self.run_id, after, asked)
            for event in events:
                await self.send_json(event)
            if events:
                after = reply["last"] = events[-1]["seq"]
            budget -= len(events)
            if len(events) < asked:
                break
            if budget <= 0:
                reply["more"] = True
                break
        await self.send_json(reply)

    def _resume_refused_for(self) -> int:
        """0 when this connection may resume now (and count it), else the seconds to wait."""
        now = time.monotonic()
        while self.resumed_at and self.resumed_at[0] <= now - RESUME_WINDOW_SECONDS:
            self.resumed_at.popleft()
        if len(self.resumed_at) >= settings.RUN_TIMELINE_RESUMES_PER_WINDOW:
            return max(1, int(self.resumed_at[0] + RESUME_WINDOW_SECONDS - now + 1))
        self.resumed_at.append(now)
        return 0

    async def run_event(self, message):
        await self.send_json({"type": "event", "seq": message["seq"], "kind": message["kind"], "data": message["data"]})
