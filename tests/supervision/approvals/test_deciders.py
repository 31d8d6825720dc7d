"""Who decided an approval: the Python and the SQL definitions (runs/models/deciders.py) agree."""
import itertools

import pytest

from runs.models import Approval
from runs.models.deciders import decider_kind, decider_kind_sql

S = Approval.Status


@pytest.mark.django_db
def test_the_sql_decider_matches_the_python_one_for_every_combination(launch):
    run = launch("Please cancel order ORD-1001, the customer asked.")
    waiting = Approval.objects.get(run=run)
    call = waiting.tool_call
    combos = list(itertools.product([s.value for s in S], [False, True], ["", "refunds"]))
    Approval.objects.bulk_create(
        Approval(run=run, tool_call=call, status=status, automatic=automatic, rule_name=rule)
        for status, automatic, rule in combos
    )
    rows = Approval.objects.exclude(pk=waiting.pk).annotate(kind=decider_kind_sql()).values_list(
        "status", "automatic", "rule_name", "grant_id", "kind"
    )
    # Every combination came back (a loop over no rows would assert nothing).
    assert sorted((s, a, r) for s, a, r, _, _ in rows) == sorted(combos)
    for status, automatic, rule, grant, kind in rows:
        expected = decider_kind(status, automatic, grant, rule)
        # /metrics names a grant and the run's policy together: "automatic".
        assert kind == ("automatic" if expected in ("grant", "policy") else expected), (status, automatic, rule)


def test_the_words_follow_the_kind():
    a = Approval(status=S.APPROVED, automatic=True, rule_name="refunds", rule_version=3)
    assert a.decider == "rule 'refunds' v3"
    assert Approval(status=S.APPROVED, automatic=True).decider == "the run's policy"
    assert Approval(status=S.EXPIRED).decider == "expiry"
    assert Approval(status=S.CLOSED).decider == "the run's end"
    assert Approval(status=S.APPROVED, decided_by_name="alice").decider == "alice"
    assert Approval(status=S.APPROVED).decider == "the system"
