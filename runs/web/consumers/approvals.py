"""Live approval queue: tells open queues and header badges that something changed, and takes decisions.

Who may decide is checked again on every decision, not only at connect: the session must still
sign the same user in (not signed out, password unchanged, account active) and that user, read
afresh from the database, must still hold the permission. A refused decision is answered and the
socket closed; a client that connects again is let in only as far as the user may go now.
"""
from channels.db import database_sync_to_async

from runs.engine.events import APPROVALS_GROUP
from runs.engine.snapshots import approval_brief
from runs.models import Approval
from runs.roles import PERM_DECIDE, PERM_VIEW_APPROVAL
from runs.supervision.decide import AlreadyDecided, EditRefused, NotAllowed, approval_decide
from runs.supervision.queue import approval_decision_text, approvals_pending_count
from runs.web.consumers.frames import BoundedJsonConsumer
from runs.web.sessions import session_user

SIGNED_OUT = "your session has ended (signed out, password changed or account deactivated): sign in again"
PERMISSION_DENIED = "permission denied"
# Close codes of a refused decision (4000-4999 are the application's own).
CLOSE_SIGNED_OUT, CLOSE_FORBIDDEN = 4401, 4403


@database_sync_to_async
def _may_view(user) -> bool:
    return user.has_perm(PERM_VIEW_APPROVAL)


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
def _pending_count() -> int:
    return approvals_pending_count()


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


class ApprovalsConsumer(BoundedJsonConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()
            return
        if not await _may_view(user):
            await self.close()
            return
        await self.channel_layer.group_add(APPROVALS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        await self.channel_layer.group_discard(APPROVALS_GROUP, self.channel_name)

    async def receive_json(self, content, **kwargs):
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
        await self.send_json({"type": "approvals.changed", "pending": await _pending_count(), "run_id": event.get("run_id")})
