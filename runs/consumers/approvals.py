"""Live approval queue: tells open queues and header badges that something changed, and takes decisions."""
from channels.db import database_sync_to_async

from runs.consumers.frames import BoundedJsonConsumer
from runs.models import Approval
from runs.roles import PERM_DECIDE, PERM_VIEW_APPROVAL
from runs.selectors.approvals import (
    approval_decision_text,
    approval_with_decider,
    approvals_pending_count,
)
from runs.services.approvals import AlreadyDecided, approval_decide
from runs.services.events import APPROVALS_GROUP
from runs.snapshots import approval_brief


@database_sync_to_async
def _permissions(user) -> tuple[bool, bool]:
    return user.has_perm(PERM_VIEW_APPROVAL), user.has_perm(PERM_DECIDE)


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
        winner = approval_with_decider(exc.approval)
        return {
            "type": "error",
            "error": f"already {approval_decision_text(winner)}",
            "approval_id": approval_id,
            "approval": approval_brief(winner),
        }
    return {"type": "decided", "approval_id": approval_id, "approval": approval_brief(approval)}


class ApprovalsConsumer(BoundedJsonConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()
            return
        can_view, self.can_decide = await _permissions(user)
        if not can_view:
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
        if not self.can_decide:
            await self.send_json({"type": "error", "error": "permission denied"})
            return
        approval_id, approve, reason = content.get("approval_id"), content.get("approve"), content.get("reason", "")
        if not isinstance(approval_id, int) or isinstance(approval_id, bool) or not isinstance(approve, bool):
            await self.send_json({"type": "error", "error": "send approval_id (integer) and approve (true/false)"})
            return
        if not isinstance(reason, str):
            reason = ""
        await self.send_json(await _decide(self.scope["user"], approval_id, approve, reason[:2000]))

    async def approvals_changed(self, event):
        await self.send_json({"type": "approvals.changed", "pending": await _pending_count(), "run_id": event.get("run_id")})
