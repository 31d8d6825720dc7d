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

While a model writes an answer, {"type": "stream", "step", "attempt", "model", "state": "writing" |
"discarded", "content", "reasoning", "calls": [{"tool", "arguments" or null, "hidden"}], "truncated",
"reason" (when discarded)} carries the whole answer so far, a few times a second at most; it is
never stored, and the step's event replaces it (runs/engine/streaming.py).

Operators steer the run on the same socket: {"type": "lever", "lever": <a lever declared in
runs/controls/levers.py: "pause", "resume", "stop", "message"...>, "text": <its field, for a lever
that takes one>} is answered {"type": "lever_done", "lever", "run",
"levers"} or {"type": "error", "lever", "message"}; what it changed arrives as events like any
other. Each lever checks the session and the permission again at that moment (signed out or a
changed password: the error, then the socket closes; a viewer: the error, and it keeps watching).

Watching is checked again too, not only at connect, on the schedule of runs/web/consumers/rights.py
(before every message the client sends, and before a live event once a few seconds have passed): a
session that no longer signs the user in gets SIGNED_OUT and 4401, a person who may no longer watch
this run (their role, or their membership of its project, gone) "permission denied" and 4403.
"""
import time
from collections import deque

from channels.db import database_sync_to_async
from django.conf import settings
from django.http import Http404

from hosting.text import MAX_SAFE_INTEGER
from projects.routes import scope_check
from runs.controls.lever_state import run_lever_state
from runs.controls.levers import LEVERS, LeverRefused
from runs.engine.storage.snapshots import run_summary
from runs.lifecycle.run_reads import EVENT_BATCH, run_events_after, run_group_name
from runs.models import Run
from runs.roles import PERM_VIEW
from runs.web.consumers.rights import CLOSE_FORBIDDEN, CLOSE_SIGNED_OUT, SIGNED_OUT, RecheckedRightsConsumer
from runs.web.sessions import session_user

PERMISSION_DENIED = "permission denied: you may no longer watch runs"


@database_sync_to_async
def _may_view(user, run_id: int) -> bool:
    return bool(user and user.is_authenticated and _in_run_project(user, run_id) and user.has_perm(PERM_VIEW))


def _in_run_project(user, run_id: int) -> bool:
    """Whether the person sees the run's project; their rights are then their role there, as on
    the run's page (projects/routes.py). A run of another project is as if there were none."""
    try:
        scope_check(user, "run_detail", {"pk": run_id})
    except Http404:
        return False
    return True


@database_sync_to_async
def _watch_refusal(session_key: str | None, user_id: int, run_id: int) -> tuple[str, int] | None:
    """None while the session still signs this user in and they may view runs; else (error, close code)."""
    user = session_user(session_key)
    if user is None or user.pk != user_id:
        return SIGNED_OUT, CLOSE_SIGNED_OUT
    if not _in_run_project(user, run_id) or not user.has_perm(PERM_VIEW):
        return PERMISSION_DENIED, CLOSE_FORBIDDEN
    return None


@database_sync_to_async
def _group_of(run_id: int) -> str | None:
    return run_group_name(run_id=run_id)


@database_sync_to_async
def _events_after(run_id: int, after: int, limit: int) -> list[dict]:
    return run_events_after(run_id=run_id, after=after, limit=limit)


@database_sync_to_async
def _pull(session_key: str | None, user_id: int, run_id: int, lever: str, text) -> dict:
    """The lever's reply, after checking who the session signs in now and what they may do."""
    user = session_user(session_key)
    if user is None or user.pk != user_id:
        return {"type": "error", "lever": lever, "message": SIGNED_OUT, "close": True}
    declared = LEVERS[lever]
    if not _in_run_project(user, run_id) or not user.has_perm(declared.permission):
        return {"type": "error", "lever": lever, "message": "permission denied: your role may watch runs, not steer them"}
    kwargs = {declared.body.field: text if isinstance(text, str) else ""} if declared.body else {}
    try:
        declared.pull(run_id=run_id, user=user, **kwargs)
    except LeverRefused as exc:
        return {"type": "error", "lever": lever, "message": str(exc)}
    run = Run.objects.get(pk=run_id)
    return {"type": "lever_done", "lever": lever, "run": run_summary(run), "levers": run_lever_state(run)}


RESUME_WINDOW_SECONDS = 10


class RunTimelineConsumer(RecheckedRightsConsumer):
    run_id: int | None = None
    group: str | None = None
    resumed_at: deque[float]

    async def connect(self):
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        if not await _may_view(self.scope.get("user"), run_id):
            await self.close()
            return
        group = await _group_of(run_id)
        if group is None:
            await self.close()
            return
        self.run_id, self.group = run_id, group
        self.resumed_at = deque()
        self.rights_checked()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        if not await self.may_still_watch():
            return
        if isinstance(content, dict) and content.get("type") == "lever":
            await self.lever(content)
            return
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

    async def lever(self, content: dict):
        lever = content.get("lever")
        if lever not in LEVERS:
            await self.send_json({"type": "error", "message": f"lever must be one of {', '.join(sorted(LEVERS))}"})
            return
        session = self.scope.get("session")
        reply = await _pull(getattr(session, "session_key", None), self.scope["user"].pk, self.run_id, lever,
                            content.get("text"))
        close = reply.pop("close", False)
        await self.send_json(reply)
        if close:
            await self.close(code=CLOSE_SIGNED_OUT)

    def _resume_refused_for(self) -> int:
        """0 when this connection may resume now (and count it), else the seconds to wait."""
        now = time.monotonic()
        while self.resumed_at and self.resumed_at[0] <= now - RESUME_WINDOW_SECONDS:
            self.resumed_at.popleft()
        if len(self.resumed_at) >= settings.RUN_TIMELINE_RESUMES_PER_WINDOW:
            return max(1, int(self.resumed_at[0] + RESUME_WINDOW_SECONDS - now + 1))
        self.resumed_at.append(now)
        return 0

    async def rights_refusal(self) -> tuple[str, int] | None:
        session = self.scope.get("session")
        return await _watch_refusal(getattr(session, "session_key", None), self.scope["user"].pk, self.run_id)

    async def leave_groups(self) -> None:
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def run_event(self, message):
        if not await self.may_still_watch_when_due():
            return
        await self.send_json({"type": "event", "seq": message["seq"], "kind": message["kind"], "data": message["data"],
                              "at": message.get("at")})

    async def run_stream(self, message):
        """An answer being written (runs/engine/streaming.py): shown, never stored or replayed."""
        if not await self.may_still_watch_when_due():
            return
        await self.send_json({"type": "stream", **{k: v for k, v in message.items() if k not in ("type", "run_id")}})
