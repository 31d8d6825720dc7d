"""The metrics page's approval and supervision figures from one read of the period's approvals.

The same figures as runs/selectors/metrics.py `_approval_stats` and supervision_metrics.py
`supervision_summary` (about ten queries, each a join over the period's runs): here the approvals
are read once, their waits computed by the same SQL expression, and counted and ranked in Python
(nearest-rank percentiles of the sorted waits), so a year of approvals costs one query.
"""
from collections import Counter, defaultdict

from django.db import connections

from runs.models import Approval
from runs.selectors.aggregates import SecondsBetween, nearest_rank_offset
from runs.selectors.supervision_metrics import (
    DECIDERS,
    NO_RULE,
    RULE_ROWS,
    SAVED_BY,
    WAIT_GROUPS,
    DeciderShare,
    RuleHits,
    Supervision,
    WaitRow,
    _seconds,
)

APPROVED, REJECTED, EXPIRED = Approval.Status.APPROVED, Approval.Status.REJECTED, Approval.Status.EXPIRED


def approval_rows(approvals) -> list[tuple]:
    """(status, automatic, has grant, rule name, rule version, tool, wait seconds or None) of each approval."""
    return plain_rows(approvals.order_by().annotate(_wait=SecondsBetween("decided_at", "requested_at")).values_list(
        "status", "automatic", "grant_id", "rule_name", "rule_version", "tool_call__tool_name", "_wait"))


def plain_rows(queryset) -> list[tuple]:
    """The rows of a values_list queryset as the database driver returns them: without Django's
    per-value conversions, which cost more than the query for tens of thousands of rows. Only for
    columns whose driver values are already right (text, numbers; SQLite's 0/1 as a boolean)."""
    sql, params = queryset.query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def nearest_rank(values: list, percent: float):
    """Nearest-rank percentile of `values` (sorted), None when empty."""
    return values[nearest_rank_offset(len(values), percent)] if values else None


def decider(status: str, automatic: bool, grant, rule_name: str) -> str | None:
    """The DECIDERS kind of one approval (None while pending)."""
    if status == EXPIRED:
        return "expiry"
    if status not in (APPROVED, REJECTED):
        return None
    if not automatic:
        return "person"
    if grant is not None:
        return "grant"
    return "rule" if rule_name else "policy"


def approval_figures(rows: list[tuple], *, vendor: str) -> tuple[dict, list, Supervision]:
    """({status: count}, sorted waits of people's decisions, the Supervision) of `rows`, ordered
    as the database `vendor` orders them (where a rule version of None goes)."""
    statuses, kinds = Counter(), Counter()
    hits = defaultdict(lambda: [0, 0, 0, 0, 0])  # (rule, version) -> approved, rejected, asked, other, all
    person_waits, by_rule, by_tool = [], defaultdict(list), defaultdict(list)
    for status, automatic, grant, rule_name, rule_version, tool, wait in rows:
        statuses[status] += 1
        kind = decider(status, automatic, grant, rule_name)
        if kind:
            kinds[kind] += 1
        if rule_name:
            counts = hits[rule_name, rule_version]
            counts[4] += 1
            if not automatic:
                counts[2] += 1
            elif grant is not None:
                counts[3] += 1
            elif status in (APPROVED, REJECTED):
                counts[0 if status == APPROVED else 1] += 1
        if kind == "person" and wait is not None:
            person_waits.append(wait)
            by_rule[rule_name].append(wait)
            by_tool[tool].append(wait)
    person_waits.sort()
    decided = sum(kinds.values())
    supervision = Supervision(
        decided=decided,
        deciders=[DeciderShare(kind=kind, label=label, count=kinds[kind], share=kinds[kind] / decided if decided else None)
                  for kind, (label, _q) in DECIDERS.items()],
        rule_hits=_rule_hits(hits, none_first=vendor == "postgresql"),
        saved_calls=sum(kinds[kind] for kind in SAVED_BY),
        person_wait_p50=_seconds(nearest_rank(person_waits, 50)),
        person_wait_p90=_seconds(nearest_rank(person_waits, 90)),
        person_decisions=len(person_waits),
        wait_by_rule=_wait_rows(by_rule, empty=NO_RULE),
        wait_by_tool=_wait_rows(by_tool),
    )
    return statuses, person_waits, supervision


def _rule_hits(hits: dict, *, none_first: bool) -> list[RuleHits]:
    # Largest first, then by name, then newest version first; a version of None comes first in
    # PostgreSQL's descending order, last in SQLite's.
    none = float("-inf") if none_first else float("inf")
    order = sorted(hits, key=lambda key: (-hits[key][4], key[0], none if key[1] is None else -key[1]))
    return [RuleHits(rule_name=name, rule_version=version, approved=hits[name, version][0],
                     rejected=hits[name, version][1], asked=hits[name, version][2], other=hits[name, version][3])
            for name, version in order[:RULE_ROWS]]


def _wait_rows(groups: dict, *, empty: str = "") -> list[WaitRow]:
    largest = sorted(groups, key=lambda key: (-len(groups[key]), key))[:WAIT_GROUPS]
    rows = []
    for key in largest:
        waits = sorted(groups[key])
        rows.append(WaitRow(key=key or empty, count=len(waits), p50=_seconds(nearest_rank(waits, 50)),
                            p90=_seconds(nearest_rank(waits, 90))))
    return rows
