"""Calls no one can approve: a call that needs two people (a critical tool, a rule asking two) in a
project with too few people who may decide, once the run's launcher and those who approved already
are left out. The card says so, and what would unblock it, instead of waiting for a second person
who does not exist.

Display only, like the rest of the queue's controls: whether a vote counts is decided by
runs/supervision/approvals/checks.py. A named group or quorum narrows the deciders further; this
counts the project's deciders only, so it never claims "no one" where someone might."""
from projects.holders import holders, names_text
from runs.models import Approval
from runs.roles import PERM_DECIDE


def no_approver_text(*, needed: int, possible: list[str], launcher: str, voters: list[str], project: str) -> str:
    """Why the approvals still `needed` cannot come from the `possible` people ("" when they can)."""
    if len(possible) >= needed:
        return ""
    left_out = [f"{launcher}, who launched the run" if launcher else "", *(f"{v}, who approved" for v in voters)]
    left_out = [who for who in left_out if who]
    who = f"only {names_text(possible)} may still approve it" if possible else "no one else may approve it"
    return (f"No one can give this call the {needed} more approval{'s' if needed != 1 else ''} it needs: "
            f"{who} in {project}" + (f" (left out: {'; '.join(left_out)})" if left_out else "") +
            f". Reject it, or ask an admin of {project} to give another person the operator role there.")


def no_approver_attach(items) -> None:
    """Set `no_approver` on each pending item that needs more than one approval; one query for all
    the items' projects, none when no item needs two people."""
    waiting = [item for item in items if item.approval.status == Approval.Status.PENDING
               and item.approval.required_approvals > 1]
    for item in items:
        item.no_approver = ""
    if not waiting:
        return
    deciders = holders(PERM_DECIDE, {item.run.agent.project_id for item in waiting})
    for item in waiting:
        approval, run = item.approval, item.run
        people = deciders[run.agent.project_id]
        launcher = people.get(run.created_by_id, "") if run.created_by_id else ""
        possible = sorted(name for pk, name in people.items() if pk != run.created_by_id and name not in item.voters)
        item.no_approver = no_approver_text(
            needed=approval.required_approvals - approval.approvals_given, possible=possible,
            launcher=launcher, voters=item.voters, project=run.agent.project.name)
