"""The nudge against rubber stamps: after a streak of quick approvals by one person (the
project's thresholds; off by default), their next card asks for a one-line reason before
Approve, and the server refuses an approval without one (the queue, the approval's page, the
API, the socket and chat alike: chat carries no reason, so its refusal sends the person to the
dashboard). Also records when a person who may decide was first shown a card, which is what
"quick" is measured from (runs/models/decision_terms.py).

The streak: the person's latest decisions in the project, newest first, counted while each is a
quick approval given without a reason. A rejection, a slower approval or an approval with a
reason ends it, so one reasoned approval (the nudge's answer) lets the next cards through. A
person who gives reasons anyway is never nudged. Deciding the final vote of a call that needs
two people counts as that person's decision; an earlier vote does not.
"""
from django.db.models import Q
from django.utils import timezone

from runs.models import Agent, Approval, CallEvidence, NudgeShown
from runs.models.decision_terms import BY_A_PERSON, quick_approval, seconds_to_decide
from runs.supervision.approvals.checks import NotAllowed


def streak_of(*, user_id: int, project_id: int, length: int, quick_seconds: int) -> int:
    """Quick approvals without a reason in a row among the person's latest `length` decisions in
    the project (one query, `length` rows at most)."""
    latest = (
        Approval.objects.filter(BY_A_PERSON, decided_by_id=user_id, run__agent__project_id=project_id)
        .order_by("-decided_at", "-pk")
        .values_list("status", "reason", "requested_at", "evidence__shown_at", "decided_at")[:length]
    )
    streak = 0
    for status, reason, requested_at, shown_at, decided_at in latest:
        seconds = seconds_to_decide(requested_at, shown_at, decided_at)
        if reason.strip() or not quick_approval(status, False, seconds, quick_seconds):
            break
        streak += 1
    return streak


def nudge_words(streak: int, quick_seconds: int) -> str:
    calls = "call" if streak == 1 else f"{streak} calls"
    return (f"You approved the last {calls} within {quick_seconds} s of seeing them: "
            "give a one-line reason to approve this one.")


def due_streak(*, user_id: int, project_id: int, length: int, quick_seconds: int) -> int:
    """The streak when it reaches the project's `length` (a nudge is due), else 0. Off at 0."""
    if length <= 0:
        return 0
    streak = streak_of(user_id=user_id, project_id=project_id, length=length, quick_seconds=quick_seconds)
    return streak if streak >= length else 0


def check_nudge(*, approval: Approval, user, approve: bool, reason: str) -> None:
    """decide.py's check: an approval without a reason by a person whose nudge is due is refused,
    in the words the card shows. One query when approving without a reason, none otherwise."""
    if not approve or reason.strip():
        return
    found = Agent.objects.filter(pk=approval.run.agent_id).values_list(
        "project_id", "project__nudge_after_quick_approvals", "project__quick_approval_seconds").first()
    if found is None:
        return
    project_id, length, quick_seconds = found
    streak = due_streak(user_id=user.pk, project_id=project_id, length=length, quick_seconds=quick_seconds)
    if streak:
        raise NotAllowed(f"{nudge_words(streak, quick_seconds)} Write it in the card's reason on the dashboard "
                         "(or send it as `reason` through the API).")


def _decidable(items: list) -> list:
    """The pending cards this person may approve (decision_refusals has set its refusals)."""
    return [item for item in items if item.approval.status == Approval.Status.PENDING
            and not getattr(item, "decide_refusal", "") and not getattr(item, "approve_refusal", "")]


def cards_shown(items: list) -> None:
    """Record that these cards were shown to a person who may decide them, the first time only:
    one UPDATE for the page, of the evidence rows not stamped yet (none when the page read every
    card's `shown_at` and each has one)."""
    ids = [item.approval.pk for item in items if item.approval.status == Approval.Status.PENDING
           and not getattr(item, "decide_refusal", "") and getattr(item, "shown_at", None) is None]
    if ids:
        CallEvidence.objects.filter(Q(shown_at__isnull=True), pk__in=ids).update(shown_at=timezone.now())


def nudges_attach(items: list, user) -> None:
    """Set each item's `nudge` ({"streak": n, "why": words}) when this person must give a reason,
    and record it as shown (once per card and person). No query while every project of the page
    has the nudge off (the default); one per project otherwise."""
    for item in items:
        item.nudge = None
    by_project: dict[int, list] = {}
    for item in _decidable(items):
        by_project.setdefault(item.run.agent.project_id, []).append(item)
    shown = []
    for project_id, cards in by_project.items():
        project = cards[0].run.agent.project
        streak = due_streak(user_id=user.pk, project_id=project_id, length=project.nudge_after_quick_approvals,
                            quick_seconds=project.quick_approval_seconds)
        if not streak:
            continue
        nudge = {"streak": streak, "why": nudge_words(streak, project.quick_approval_seconds)}
        for item in cards:
            item.nudge = nudge
            shown.append(NudgeShown(approval_id=item.approval.pk, user=user, user_name=user.get_username(),
                                    project_id=project_id, streak=streak))
    if shown:
        NudgeShown.objects.bulk_create(shown, ignore_conflicts=True)
