"""An open socket reads its person's rights again, not only at connect: the run timeline's and the
approval queue's sockets check on one schedule.

Before every message the client sends is handled, and before a live message is sent once
RIGHTS_RECHECK_SECONDS have passed since the last check (a socket that only listens costs a query
that often at most). A session that no longer signs the user in (signed out, password changed,
account deactivated) gets {"type": "error", <error_key>: SIGNED_OUT} and the socket closes with
4401; a person who may no longer watch gets the consumer's "permission denied" sentence and 4403.
Neither is sent anything more: the socket leaves its groups before it says why.
"""
import time

from runs.web.consumers.frames import BoundedJsonConsumer

SIGNED_OUT = "your session has ended (signed out, password changed or account deactivated): sign in again"
# Close codes when the right to watch is gone (4000-4999 are the application's own).
CLOSE_SIGNED_OUT, CLOSE_FORBIDDEN = 4401, 4403
RIGHTS_RECHECK_SECONDS = 5


class RecheckedRightsConsumer(BoundedJsonConsumer):
    """Subclasses say what they check (`rights_refusal`) and which groups they leave (`leave_groups`)."""

    error_key = "message"  # the field of an error message that holds its sentence
    rights_checked_at: float = 0.0
    refused: bool = False  # the right to watch is gone: the socket is closing, nothing more is sent

    async def rights_refusal(self) -> tuple[str, int] | None:
        """None while the person may still watch (read afresh); else (error, close code)."""
        raise NotImplementedError

    async def leave_groups(self) -> None:
        raise NotImplementedError

    def rights_checked(self) -> None:
        self.rights_checked_at = time.monotonic()

    async def may_still_watch(self) -> bool:
        """Whether the person may still watch; if not, says why and closes the socket."""
        if self.refused:
            return False
        refused = await self.rights_refusal()
        if refused is None:
            self.rights_checked()
            return True
        error, code = refused
        self.refused = True
        # Leave the groups first: nothing published meanwhile reaches a socket that is closing.
        await self.leave_groups()
        await self.send_json({"type": "error", self.error_key: error})
        await self.close(code=code)
        return False

    async def may_still_watch_when_due(self) -> bool:
        """Before a live message: checks again once RIGHTS_RECHECK_SECONDS have passed."""
        if not self.refused and time.monotonic() - self.rights_checked_at < RIGHTS_RECHECK_SECONDS:
            return True
        return await self.may_still_watch()
