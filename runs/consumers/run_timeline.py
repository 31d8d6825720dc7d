"""The live timeline of one run over a websocket.

Protocol: the client sends {"type": "resume", "after": N}; the server answers with every
stored event with seq > N, in order, read from the database (the channel layer may drop
messages, the database does not), then {"type": "resumed", "last": <seq of the last one
sent, or N>}. Live events arrive in the same shape, {"type": "event", "seq", "kind", "data"},
and may repeat or overtake replayed ones: the client applies them strictly by seq.
"""
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

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
def _events_after(run_id: int, after: int) -> list[dict]:
    return run_events_after(run_id=run_id, after=after)


class RunTimelineConsumer(AsyncJsonWebsocketConsumer):
    run_id: int | None = None
    group: str | None = None

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
        # Live events that arrive meanwhile wait: a consumer handles one message at a time.
        while True:
            events = await _events_after(self.run_id, after)
            for event in events:
                await self.send_json(event)
            if events:
                after = events[-1]["seq"]
            if len(events) < EVENT_BATCH:
                break
        await self.send_json({"type": "resumed", "last": after})

    async def run_event(self, message):
        await self.send_json({"type": "event", "seq": message["seq"], "kind": message["kind"], "data": message["data"]})

    @classmethod
    async def decode_json(cls, text_data):
        # A frame that is not JSON gets an error message instead of closing the socket.
        try:
            return await super().decode_json(text_data)
        except ValueError:
            return None
