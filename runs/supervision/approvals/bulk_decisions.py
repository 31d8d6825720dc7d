"""Deciding several approvals at once, as the queue's bulk actions and the API do: each approval
is decided on its own by `approval_decide` (its own transaction and conditional UPDATE), so one
decided meanwhile, or one this person may not decide, is reported and never stops the others.

Approving a selection that holds twins (calls on the same thing: runs/supervision/evidence/twins.py)
decides nothing until the person names them: one click must not cancel the same order twice."""
from dataclasses import dataclass, field

from projects.access import visible_projects
from runs.models import Approval
from runs.supervision.approvals.decide import AlreadyDecided, EditRefused, NotAllowed, approval_decide
from runs.supervision.evidence.twins import TwinsUnconfirmed, twins_check
from runs.supervision.queue.cards import approval_decision_text

__all__ = ["MAX_BULK", "BulkOutcome", "TwinsUnconfirmed", "approvals_decide_many", "decided_projects"]

MAX_BULK = 200


@dataclass
class BulkOutcome:
    decided: list[Approval] = field(default_factory=list)  # a two-person call may still be pending here: "1 of 2"
    already: list[tuple[int, str]] = field(default_factory=list)  # (id, "approved by bob at ...")
    refused: list[tuple[int, str]] = field(default_factory=list)  # (id, why this person may not)


def decided_projects(user) -> set[int] | None:
    """The projects whose calls this person may be deciding (None: any), as decide.py scopes them:
    twins are looked for there only, so nobody learns of another team's calls."""
    return visible_projects(user) or None  # no role anywhere: the permission alone decides, as in decide.py


def approvals_decide_many(*, approval_ids, user, approve: bool, reason: str = "", twins_confirmed=()) -> BulkOutcome:
    """Decide each approval of `approval_ids` (in order, each once) with one reason.

    An approval of twins raises TwinsUnconfirmed, deciding none, unless `twins_confirmed` names
    every one of them (the ids TwinsUnconfirmed.confirm lists); a rejection needs no confirmation."""
    if approve:
        twins_check(approval_ids, confirmed=twins_confirmed, projects=decided_projects(user))
    outcome = BulkOutcome()
    for approval_id in dict.fromkeys(approval_ids):
        try:
            outcome.decided.append(approval_decide(approval_id=approval_id, user=user, approve=approve, reason=reason))
        except AlreadyDecided as exc:
            outcome.already.append((approval_id, f"Already {approval_decision_text(exc.approval)}."))
        except Approval.DoesNotExist:
            outcome.refused.append((approval_id, "No such approval."))
        except (NotAllowed, EditRefused) as exc:
            outcome.refused.append((approval_id, str(exc)))
    return outcome
