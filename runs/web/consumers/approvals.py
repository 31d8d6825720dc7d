"""Live approval queue: tells open queues and header badges that something changed, takes
decisions, and announces the calls each person may decide (browser notifications).

Who may watch is checked again, not only at connect, on the run timeline's schedule
(runs/web/consumers/rights.py): before every message the client sends, and before a change is told
once a few seconds have passed. The projects whose changes the socket hears are read again then: a
person removed from a project stops hearing of it; one who may no longer watch the queue at all gets
"permission denied: ..." and 4403, a session that no longer signs them in SIGNED_OUT and 4401.

Who may decide is checked again on every decision, not only at connect: the session must still
sign the same user in (not signed out, password unchanged, account active) and that user, read
afresh from the database, must still hold the permission. A refused decision is answered and the
socket closed; a client that connects again is let in only as far as the user may go now.

Announcements: a client that sends {"type": "announce"} (notify.js, when its person turned
notifications or the sound on) is answered {"type": "announcing"}; from then on, after each
"approvals.changed" of a run, it also gets {"type": "approval.to_decide", "approval_id", "run_id",
"tool", "task", "url"} for each call of that run that arrived since and that this user may decide,
read afresh then (supervision.announcements): never for a viewer, a group they are not in, or a
two-person call of a run they launched. A session that no longer signs the user in gets the error
and the socket closes (4401), as for a decision. Calls that arrive while the socket is down are not
announced after it reconnects: the badge counts them.
"""
from channels.db import database_sync_to_async
from django.urls import reverse

from projects.access import visible_projects
from runs.engine.storage.events import APPROVALS_GROUP
from runs.engine.storage.snapshots import approval_brief
from runs.models import Approval, Run
from runs.roles import PERM_DECIDE, PERM_VIEW_APPROVAL
from runs.supervision.approvals.decide import AlreadyDecided, EditRefused, NotAllowed, approval_decide
from runs.supervision.queue.announcements import approvals_pending_by_run, approvals_to_announce
from runs.supervision.queue.cards import approval_decision_text, approvals_pending_count
from runs.web.consumers.rights import CLOSE_FORBIDDEN, CLOSE_SIGNED_OUT, SIGNED_OUT, RecheckedRightsConsumer
from runs.web.sessions import session_user

PERMISSION_DENIED = "permission denied"
NO_LONGER_WATCHING = "permission denied: you may no longer see the approval queue"


def _view_rights(user) -> tuple[bool, set[int] | None]:
    """(whether the person may watch the queue, the projects whose calls they see: None for all)."""
    return user.has_perm(PERM_VIEW_APPROVAL), visible_projects(user)


_may_view = database_sync_to_async(_view_rights)


@database_sync_to_async
def _watching_now(session_key: str | None, user_id: int) -> tuple[tuple[str, int] | None, set[int] | None]:
    """(None, the projects whose calls the socket's user sees now: None for all) while the session
    still signs them in and they may watch the queue; else ((error, close code), None)."""
    user = session_user(session_key)
    if user is None or user.pk != user_id:
        return (SIGNED_OUT, CLOSE_SIGNED_OUT), None
    allowed, projects = _view_rights(user)
    if not allowed:
        return (NO_LONGER_WATCHING, CLOSE_FORBIDDEN), None
    return None, projects


@database_sync_to_async
def _run_project(run_id: int) -> int | None:
    return Run.objects.filter(pk=run_id).values_list("agent__project_id", flat=True).first()


@database_sync_to_async
def _decider_now(session_key: str | None, user_id: int):
    """(the socket's user as they are now, None) when they may decide; else (None, (error, close code))."""
    user = session_user(session_key)
    if user is None or user.pk != user_id:
        return None, (SIGNED_OUT, CLOSE_SIGNED_OUT)
    if not user.has_perm(PERM_DECIDE):
        return None, (PERMISSION_DENIED, CLOSE_FORBIDDEN)
    return user, None


@database_sync_to_async
def _pending_by_run() -> dict[int, set[int]]:
    return approvals_pending_by_run()


@database_sync_to_async
def _to_announce(session_key: str | None, user_id: int, run_id: int, told: set[int]):
    """(messages for the calls of run `run_id` this user may decide now and was not told of, the
    run's pending approval ids); None when the session no longer signs this user in."""
    user = session_user(session_key)
    if user is None or user.pk != user_id:
        return None
    found, pending = approvals_to_announce(user=user, run_id=run_id, told=told)
    messages = [
        {"type": "approval.to_decide", "approval_id": a.approval_id, "run_id": a.run_id, "tool": a.tool, "task": a.task,
         "url": reverse("approval_detail", args=[a.approval_id])}
        for a in found
    ]
    return messages, pending


@database_sync_to_async
def _pending_count(projects: set[int] | None) -> int:
    return approvals_pending_count(projects)


@database_sync_to_async
def _decide(user, approval_id: int, approve: bool, reason: str) -> dict:
    try:
        approval = approval_decide(approval_id=approval_id, user=user, approve=approve, reason=reason)
    except Approval.DoesNotExist:
        return {"type": "error", "error": "no such approval", "approval_id": approval_id}
    except AlreadyDecided as exc:
        winner = exc.approval
        return {
            "type": "error",
            "error": f"already {approval_decision_text(winner)}",
            "approval_id": approval_id,
            "approval": approval_brief(winner),
        }
    except (NotAllowed, EditRefused) as exc:
        # Not this person's decision (launched the run, already approved, not in the named
        # group): the socket stays open, the approval stays pending.
        return {"type": "error", "error": str(exc), "approval_id": approval_id}
    return {"type": "decided", "approval_id": approval_id, "approval": approval_brief(approval)}


class ApprovalsConsumer(RecheckedRightsConsumer):
    error_key = "error"
    # {run id: its pending approval ids this socket was told of (or found when it started
    # announcing)}; None until the client asks for announcements.
    told: dict[int, set[int]] | None = None
    # The projects whose calls this socket hears of (None: every project's), and what it learnt
    # of runs' projects: another project's changes are not even counted.
    projects: set[int] | None = None
    run_projects: dict[int, int | None]

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()
            return
        allowed, self.projects = await _may_view(user)
        if not allowed:
            await self.close()
            return
        self.run_projects = {}
        self.rights_checked()
        await self.channel_layer.group_add(APPROVALS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        await self.channel_layer.group_discard(APPROVALS_GROUP, self.channel_name)

    async def rights_refusal(self) -> tuple[str, int] | None:
        session = self.scope.get("session")
        refused, projects = await _watching_now(getattr(session, "session_key", None), self.scope["user"].pk)
        if refused is None:
            self.projects = projects  # added to a project or removed from one since: heard from now on
        return refused

    async def leave_groups(self) -> None:
        await self.channel_layer.group_discard(APPROVALS_GROUP, self.channel_name)

    async def receive_json(self, content, **kwargs):
        if not await self.may_still_watch():
            return
        if isinstance(content, dict) and content.get("type") == "announce":
            self.told = await _pending_by_run()  # what waits already is in the queue, not news
            await self.send_json({"type": "announcing"})
            return
        if not isinstance(content, dict) or content.get("type") != "decide":
            await self.send_json({"type": "error", "error": "unknown message type"})
            return
        session = self.scope.get("session")
        user, refused = await _decider_now(getattr(session, "session_key", None), self.scope["user"].pk)
        if refused is not None:
            error, code = refused
            await self.send_json({"type": "error", "error": error})
            await self.close(code=code)
            return
        approval_id, approve, reason = content.get("approval_id"), content.get("approve"), content.get("reason", "")
        if not isinstance(approval_id, int) or isinstance(approval_id, bool) or not isinstance(approve, bool):
            await self.send_json({"type": "error", "error": "send approval_id (integer) and approve (true/false)"})
            return
        if not isinstance(reason, str):
            reason = ""
        await self.send_json(await _decide(user, approval_id, approve, reason[:2000]))

    async def approvals_changed(self, event):
        if not await self.may_still_watch_when_due():
            return
        run_id = event.get("run_id")
        if self.projects is not None and isinstance(run_id, int):
            if run_id not in self.run_projects:
                if len(self.run_projects) > 10_000:
                    self.run_projects.clear()  # a socket open for days: forget, and ask again
                self.run_projects[run_id] = await _run_project(run_id)
            if self.run_projects[run_id] not in self.projects:
                return
        await self.send_json({"type": "approvals.changed", "pending": await _pending_count(self.projects),
                              "run_id": run_id})
        if self.told is not None and isinstance(run_id, int):
            await self._announce(run_id)

    async def _announce(self, run_id: int):
        session = self.scope.get("session")
        found = await _to_announce(getattr(session, "session_key", None), self.scope["user"].pk, run_id,
                                   self.told.get(run_id, set()))
        if found is None:
            self.told = None
            await self.send_json({"type": "error", "error": SIGNED_OUT})
            await self.close(code=CLOSE_SIGNED_OUT)
            return
        messages, pending = found
        if pending:
            self.told[run_id] = pending
        else:
            self.told.pop(run_id, None)  # nothing waits in this run: forget it
        for message in messages:
            await self.send_json(message)
