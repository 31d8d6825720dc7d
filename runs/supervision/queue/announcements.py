"""Which calls to announce to one person (the browser's notification and sound): the pending
approvals of a run that this person may decide and has not been told of yet.

"May decide" is the queue's rule, not a copy of it: the permission to decide, then
card_controls.decision_refusals (a named group's members only; not the launcher of a run whose
call needs two people), the rules checks.check_decider applies to the decision itself. So nobody is
invited to a decision the server would refuse, and nothing is sent to who cannot take it.

Each socket keeps what it was told per run (`told`): a change of a run reads that run's pending
approvals (one indexed query) and, only when one is new, who may decide it (three or four more).
"""
from collections import defaultdict
from dataclasses import dataclass

from projects.access import may
from runs.models import Approval, Run
from runs.roles import PERM_DECIDE
from runs.supervision.queue.card_controls import decision_refusals
from runs.supervision.queue.cards import PendingApproval
from runs.supervision.queue.facts import approvals_supervision

TASK_CHARS = 120  # the run's task in a notification: a glance, the approval's page has the rest


@dataclass(frozen=True)
class Announcement:
    approval_id: int
    run_id: int
    tool: str
    task: str


def approvals_pending_by_run() -> dict[int, set[int]]:
    """{run id: ids of its pending approvals}: what a socket counts as told when it starts
    announcing, so only calls that arrive afterwards are announced."""
    told: dict[int, set[int]] = defaultdict(set)
    for run_id, approval_id in Approval.objects.filter(status=Approval.Status.PENDING).values_list("run_id", "pk"):
        told[run_id].add(approval_id)
    return dict(told)


def project_of_run(run_id: int) -> int | None:
    return Run.objects.filter(pk=run_id).values_list("agent__project_id", flat=True).first()


def approvals_to_announce(*, user, run_id: int, told: set[int]) -> tuple[list[Announcement], set[int]]:
    """(the pending approvals of run `run_id`, other than those in `told`, that `user` may decide,
    oldest first; the ids of every pending approval of that run now, to keep as told).

    An approval this person may not decide counts as told too: it is not announced later, even
    if they join its group meanwhile (the queue shows it)."""
    pending = list(
        Approval.objects.filter(run_id=run_id, status=Approval.Status.PENDING)
        .select_related("run", "tool_call")
        .only("id", "status", "group_id", "required_approvals", "run__id", "run__task", "run__created_by_id",
              "tool_call__id", "tool_call__tool_name")
        .order_by("requested_at", "pk")
    )
    now_pending = {approval.pk for approval in pending}
    new = [approval for approval in pending if approval.pk not in told]
    if not new or not may(user, PERM_DECIDE, project_of_run(run_id)):
        return [], now_pending
    facts = approvals_supervision(new)
    items = []
    for approval in new:
        item = PendingApproval(approval=approval, run=approval.run, call=approval.tool_call)
        item.voters, item.group_name = facts[approval.pk].voters, facts[approval.pk].group or ""
        items.append(item)
    decision_refusals(items, user)
    announcements = [
        Announcement(approval_id=item.approval.pk, run_id=run_id, tool=item.call.tool_name,
                     task=_shortened(item.run.task))
        for item in items
        if not item.decide_refusal and not item.approve_refusal  # a launcher's two-person call: others approve it
    ]
    return announcements, now_pending


def _shortened(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TASK_CHARS else text[: TASK_CHARS - 1] + "…"
