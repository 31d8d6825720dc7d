"""The metrics page's approval and supervision figures from counted approvals and their waits.

The same figures as runs/observability/metrics/page.py `_approval_stats` and supervision_figures.py
`supervision_summary` (about ten queries, each a join over the period's runs), from approvals
given as counted rows (the daily rollups' and the raw rows' alike, see rollup_reads.py) and
people's waits given as `Waits`: counts per bucket, and the exact waits of any bucket on demand.
A nearest-rank percentile is found in two steps, both exact: the counts say which bucket holds
the value of its rank and where in the bucket it is; that bucket's waits, sorted, give the value.
So a year of approvals costs the counts and a few buckets' waits, never every wait.
"""

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

from django.db import connections

from runs.models import Approval
from runs.observability.metrics.aggregates import approval_wait_seconds, nearest_rank_offset
from runs.observability.metrics.rollups import latency_bucket
from runs.observability.metrics.supervision_figures import (
    DECIDERS,
    NO_RULE,
    RULE_ROWS,
    SAVED_BY,
    WAIT_GROUPS,
    DeciderShare,
    RuleHits,
    SupervisionFigures,
    WaitRow,
    _seconds,
)

APPROVED, REJECTED, EXPIRED, CLOSED = (
    Approval.Status.APPROVED, Approval.Status.REJECTED, Approval.Status.EXPIRED, Approval.Status.CLOSED
)


def approval_rows(approvals) -> list[tuple]:
    """(status, automatic, grant id, rule name, rule version, tool, wait seconds or None) of each approval."""
    return plain_rows(
        approvals.order_by()
        .annotate(_wait=approval_wait_seconds())
        .values_list("status", "automatic", "grant_id", "rule_name", "rule_version", "tool_call__tool_name", "_wait")
    )


class Waits:
    """People's waits, by (rule name, tool): `counts` {(rule, tool): {bucket: decisions}}, and
    `read(buckets)` giving (rule, tool, wait) of every wait in those buckets (see the module)."""

    def __init__(self, counts: dict, read: Callable[[set], Iterable[tuple]]):
        self.counts, self.read = counts, read

    def group_sizes(self, by: int) -> Counter:
        """{rule name (by=0) or tool (by=1): decisions}."""
        sizes = Counter()
        for key, buckets in self.counts.items():
            sizes[key[by]] += sum(buckets.values())
        return sizes

    def percentiles(self, targets: list[tuple]) -> dict:
        """{(by, key, percent): the nearest-rank percentile}, for targets (by, key, percent) where
        `by` None means every wait, 0 the waits of rule `key`, 1 those of tool `key`."""
        places, wanted, groups = {}, set(), {}
        for target in targets:
            by, key, percent = target
            if (by, key) not in groups:
                groups[by, key] = merged = Counter()
                for group, buckets in self.counts.items():
                    if by is None or group[by] == key:
                        merged.update(buckets)
            merged = groups[by, key]
            total = sum(merged.values())
            if not total:
                continue
            rank = nearest_rank_offset(total, percent)
            for bucket in sorted(merged):
                if rank < merged[bucket]:
                    places[target] = (bucket, rank)
                    wanted.add(bucket)
                    break
                rank -= merged[bucket]
        in_bucket = defaultdict(list)
        for rule, tool, wait in self.read(wanted) if wanted else ():
            in_bucket[latency_bucket(wait)].append((rule, tool, wait))
        found = {}
        for (by, key, percent), (bucket, rank) in places.items():
            waits = sorted(w for *group, w in in_bucket[bucket] if by is None or group[by] == key)
            found[by, key, percent] = waits[rank]
        return found


def counted_rows(rows: list[tuple]) -> tuple[list[tuple], Waits]:
    """Approval rows as approval_rows gives them, as (status, automatic, granted, rule name, rule
    version, tool, 1) and the Waits of their people's decisions (read from the rows themselves)."""
    counted, waits, counts = [], [], defaultdict(Counter)
    for status, automatic, grant, rule_name, rule_version, tool, wait in rows:
        counted.append((status, automatic, grant is not None, rule_name, rule_version, tool, 1))
        if Approval.decider_kind(status, automatic, grant is not None, rule_name) == "person" and wait is not None:
            waits.append((rule_name, tool, wait))
            counts[rule_name, tool][latency_bucket(wait)] += 1
    return counted, Waits(counts, lambda buckets: [row for row in waits if latency_bucket(row[2]) in buckets])


def plain_rows(queryset) -> list[tuple]:
    """The rows of a values_list queryset as the database driver returns them: without Django's
    per-value conversions, which cost more than the query for tens of thousands of rows. Only for
    columns whose driver values are already right (text, numbers; SQLite's 0/1 as a boolean)."""
    sql, params = queryset.query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()




def approval_figures(rows: Iterable[tuple], waits: Waits, *, vendor: str) -> tuple[dict, tuple, SupervisionFigures]:
    """({status: count}, (people's decisions, p50, p95 of their waits), the SupervisionFigures) of the
    counted `rows` (see counted_rows) and `waits`, ordered as the database `vendor` orders them
    (where a rule version of None goes)."""
    statuses, kinds = Counter(), Counter()
    hits = defaultdict(lambda: [0, 0, 0, 0, 0])  # (rule, version) -> approved, rejected, asked, other, all
    for status, automatic, granted, rule_name, rule_version, tool, n in rows:
        statuses[status] += n
        kind = Approval.decider_kind(status, automatic, granted, rule_name)
        if kind:
            kinds[kind] += n
        if rule_name:
            counts = hits[rule_name, rule_version]
            counts[4] += n
            if not automatic:
                counts[2] += n
            elif granted:
                counts[3] += n
            elif status in (APPROVED, REJECTED):
                counts[0 if status == APPROVED else 1] += n
    by_rule, by_tool = waits.group_sizes(0), waits.group_sizes(1)
    rules, tools = _largest(by_rule), _largest(by_tool)
    found = waits.percentiles(
        [(None, None, p) for p in (50, 90, 95)]
        + [(by, key, p) for by, keys in ((0, rules), (1, tools)) for key in keys for p in (50, 90)]
    )
    person_decisions = sum(by_rule.values())
    decided = sum(kinds.values())
    supervision = SupervisionFigures(
        decided=decided,
        deciders=[
            DeciderShare(kind=kind, label=label, count=kinds[kind], share=kinds[kind] / decided if decided else None)
            for kind, (label, _q) in DECIDERS.items()
        ],
        rule_hits=_rule_hits(hits, none_first=vendor == "postgresql"),
        saved_calls=sum(kinds[kind] for kind in SAVED_BY),
        person_wait_p50=_seconds(found.get((None, None, 50))),
        person_wait_p90=_seconds(found.get((None, None, 90))),
        person_decisions=person_decisions,
        wait_by_rule=[_wait_row(found, 0, key, by_rule[key], empty=NO_RULE) for key in rules],
        wait_by_tool=[_wait_row(found, 1, key, by_tool[key]) for key in tools],
    )
    return statuses, (person_decisions, found.get((None, None, 50)), found.get((None, None, 95))), supervision


def _largest(sizes: Counter) -> list:
    return sorted((key for key, n in sizes.items() if n), key=lambda key: (-sizes[key], key))[:WAIT_GROUPS]


def _wait_row(found: dict, by: int, key, count: int, *, empty: str = "") -> WaitRow:
    return WaitRow(
        key=key or empty, count=count, p50=_seconds(found.get((by, key, 50))), p90=_seconds(found.get((by, key, 90)))
    )


def _rule_hits(hits: dict, *, none_first: bool) -> list[RuleHits]:
    # Largest first, then by name, then newest version first; a version of None comes first in
    # PostgreSQL's descending order, last in SQLite's.
    none = float("-inf") if none_first else float("inf")
    order = sorted(hits, key=lambda key: (-hits[key][4], key[0], none if key[1] is None else -key[1]))
    return [
        RuleHits(
            rule_name=name,
            rule_version=version,
            approved=hits[name, version][0],
            rejected=hits[name, version][1],
            asked=hits[name, version][2],
            other=hits[name, version][3],
        )
        for name, version in order[:RULE_ROWS]
    ]
