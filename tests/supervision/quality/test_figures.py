"""The Supervision page's figures over a seeded history whose numbers are worked out by hand
(tests/supervision/quality/history.py): time to decide, quick approvals, contradicted decisions,
agreement with rules in shadow, nudges, the longest waits, per person and per project."""
import pytest

from runs.supervision.quality.report import contradicted_calls, longest_waits, quality_report, scope_of
from tests.supervision.quality.history import history
from tests.supervision.quality.seed import NOW, at

pytestmark = pytest.mark.django_db


@pytest.fixture
def h():
    return history()


def quality_figures(scope):
    return quality_report(scope, people=False).figures


def test_a_projects_figures_count_its_peoples_decisions_in_the_period_only(h):
    f = quality_figures(scope_of(project_id=h.shop.pk, now=NOW))
    # 11 decisions by people; rules, expiry, waiting calls, older decisions and Other's are left out.
    assert (f.decisions, f.approved, f.rejected) == (11, 9, 2)
    # From the card appearing: 1 2 3 4 5 8 20 30 40 60 100 -> 6th of 11 and 10th of 11.
    assert (f.decide_p50, f.decide_p90) == (8.0, 60.0)
    # Within 5 s: alice's 2, 4, 5 (never shown: from asking) and 3, and bob's 1.
    assert (f.quick, f.quick_percent) == (5, round(100 * 5 / 9, 1))
    assert (f.failed, f.moot, f.reversed, f.contradicted) == (1, 2, 1, 4)
    assert (f.shadow_agreed, f.shadow_disagreed, f.shadow_percent) == (2, 1, 66.7)
    assert f.nudges == 2


def test_a_persons_figures_are_their_own_decisions_only(h):
    f = quality_figures(scope_of(project_id=h.shop.pk, person_id=h.alice.pk, now=NOW))
    assert (f.decisions, f.approved) == (8, 7)
    # 2 3 4 5 20 30 40 60: 4th and 8th of 8.
    assert (f.decide_p50, f.decide_p90) == (5.0, 60.0)
    assert (f.quick, f.contradicted, f.failed, f.moot, f.reversed) == (4, 4, 1, 2, 1)
    assert (f.shadow_agreed, f.shadow_disagreed) == (1, 1)
    assert f.nudges == 1
    # Three decisions in one hour of the 5th, five in five other hours: 8 in 6 hours.
    assert (f.active_hours, f.per_hour) == (6, 1.3)


def test_another_projects_decisions_never_count(h):
    f = quality_figures(scope_of(project_id=h.other.pk, person_id=h.alice.pk, now=NOW))
    assert (f.decisions, f.quick, f.failed) == (1, 1, 1)
    f = quality_figures(scope_of(project_id=h.other.pk, now=NOW))
    assert (f.decisions, f.quick, f.contradicted, f.nudges) == (3, 3, 3, 0)


def test_each_person_of_the_project_with_their_rate_and_median(h):
    rows = [(p.name, p.decisions, p.approved, p.quick, p.contradicted, p.active_hours, p.per_hour, p.decide_p50)
            for p in quality_report(scope_of(project_id=h.shop.pk, now=NOW)).people]
    assert rows == [("alice", 8, 7, 4, 4, 6, 1.3, 5.0), ("bob", 3, 2, 1, 0, 3, 1.0, 8.0)]


def test_the_longest_waits_are_from_asking_to_the_decision_or_to_now(h):
    waits = [(w.approval.pk, w.seconds) for w in longest_waits(scope_of(project_id=h.shop.pk, now=NOW), limit=4)]
    a = h.approvals
    still = (NOW - at(18, 10)).total_seconds()
    assert waits == [(a["waiting"].pk, still), (a["expired"].pk, 3600.0), (a["reverses"].pk, 100.0),
                     (a["failed"].pk, 60.0)]
    mine = [w.approval.pk for w in longest_waits(scope_of(project_id=h.shop.pk, person_id=h.alice.pk, now=NOW), limit=3)]
    # 60 s, then 40 s, then 32 s (30 s before the card was shown, 2 s after).
    assert mine == [a["failed"].pk, a["reversed"].pk, a["quick_after_shown"].pk]


def test_contradicted_calls_newest_first_with_why(h):
    found = [(c.approval.pk, c.why) for c in contradicted_calls(scope_of(project_id=h.shop.pk, now=NOW))]
    a = h.approvals
    assert found == [(a["moot_quick"].pk, "moot"), (a["reversed"].pk, "reversed"), (a["already_done"].pk, "moot"),
                     (a["failed"].pk, "failed")]


def test_the_series_has_a_point_per_day_with_the_days_figures(h):
    series = quality_report(scope_of(project_id=h.shop.pk, days=30, now=NOW))
    assert len(series.days) == 30 and series.days[-1] == NOW.date()
    fifth = series.by_day[at(5).date()]
    assert (fifth.decisions, fifth.approved, fifth.quick, fifth.contradicted, fifth.active_hours) == (3, 3, 3, 0, 1)
    assert series.by_day[at(6).date()].failed == 1
    assert (series.ranks[at(5).date(), 50], series.ranks[at(5).date(), 90]) == (4.0, 5.0)
    assert series.nudges == {at(15).date(): 1, at(14).date(): 1}
