"""A quorum: a call that needs N approvals from different people, and at least one of them from
each of some named groups ("one from Finance and one from Support"). Plain functions over plain
data; `quorum_voters` is the one read.

Each person counts once, and covers at most one group: a person in both Finance and Support does
not make "one from each" alone. Whether the groups are covered is a matching of people to groups
(Kuhn's augmenting paths; a quorum has at most 10 people and groups).
"""
from collections.abc import Iterable, Mapping

from django.contrib.auth import get_user_model

from runs.models import ApprovalVote

MAX_APPROVALS = 10


def groups_uncovered(group_ids: Iterable[int], voters: Mapping[str, set[int]]) -> list[int]:
    """The groups left without a person of their own when each voter covers at most one of the
    groups they belong to, matched to cover as many as possible; [] when every group is covered."""
    group_of: dict[str, int] = {}  # voter -> the group they cover

    def cover(group: int, tried: set[str]) -> bool:
        for voter, member_of in voters.items():
            if group not in member_of or voter in tried:
                continue
            tried.add(voter)
            # A free voter, or one whose group another voter can take over.
            if voter not in group_of or cover(group_of[voter], tried):
                group_of[voter] = group
                return True
        return False

    return [group for group in dict.fromkeys(group_ids) if not cover(group, set())]


def quorum_met(*, required: int, group_ids: Iterable[int], voters: Mapping[str, set[int]]) -> bool:
    return len(voters) >= required and not groups_uncovered(group_ids, voters)


def quorum_voters(*, approval_id: int, group_ids: list[int]) -> dict[str, set[int]]:
    """The people whose approval counts now (for the arguments as they stand), each with the
    quorum's groups they belong to. Two queries."""
    votes = list(
        ApprovalVote.objects.filter(approval_id=approval_id, superseded_at__isnull=True).values_list("user_name", "user_id")
    )
    memberships = get_user_model().groups.through.objects.filter(
        user_id__in=[user_id for _, user_id in votes if user_id is not None], group_id__in=group_ids
    ).values_list("user_id", "group_id")
    by_user: dict[int, set[int]] = {}
    for user_id, group_id in memberships:
        by_user.setdefault(user_id, set()).add(group_id)
    return {name: by_user.get(user_id, set()) for name, user_id in votes}
