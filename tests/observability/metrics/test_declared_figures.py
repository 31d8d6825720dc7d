"""A figure declared once (runs/observability/metrics/figures.py) is on the page, in the API and
in the rollups, and gives the same value from the runs' own rows and from the rollups: declared
here as a new figure would be (tool calls per run, over totals of each kind of row), on the
hand-made dataset of test_metrics.py."""

import importlib
import re
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.db.models import Count, Q, Sum
from django.urls import reverse

from runs.models import RollupDay, Run, Step, ToolCall
from runs.models.figures import own_iterations
from runs.models.rollups import FigureRollup
from runs.observability.metrics import figures, rollups
from runs.observability.metrics.figures import CALLS, PER_RUN, RUNS, STEPS, Figure, Total, share
from runs.observability.metrics.page import metrics_summary
from runs.observability.metrics.rollup_reads import built_days
from tests.lifecycle.test_history import user_in
from tests.observability.metrics.test_metrics import END, START, at, dataset  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

FINISHED_CALLS = [ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED, ToolCall.Status.REJECTED]
EXTRA_TOTALS = (
    Total("test_model_calls", STEPS, Count("pk")),
    Total("test_finished_calls", CALLS, Count("pk", filter=Q(status__in=FINISHED_CALLS))),
    Total("test_own_iterations", RUNS, Sum(own_iterations())),
)
CALLS_PER_RUN = Figure(
    "test_calls_per_run", "Tool calls per run", PER_RUN, lambda t: share(t["test_finished_calls"], t["runs"]),
    note="Finished tool calls per run created.",
)
WINDOW = {"date_from": START.isoformat(), "date_to": END.isoformat()}


@pytest.fixture
def declared(monkeypatch):
    """The extra totals and figure declared, as a change of figures.py would declare them."""
    monkeypatch.setattr(figures, "TOTALS", figures.TOTALS + EXTRA_TOTALS)
    monkeypatch.setattr(figures, "FIGURES", figures.FIGURES + (CALLS_PER_RUN,))


def build_window() -> None:
    day = START
    while day <= END:
        rollups.rebuild_day(day)
        day += timedelta(days=1)


def values(summary, names=("runs_total", "finished_runs", "succeeded_runs", "success_rate", "test_calls_per_run")):
    """The values of the figures `names` (those these tests know; every figure when None)."""
    return {name: found.value for name, found in summary.figures.items() if names is None or name in names}


def test_a_declared_figure_counts_the_same_from_raw_rows_and_from_the_rollups(declared, dataset):  # noqa: F811
    raw = metrics_summary(start=START, end=END, rollups=False)
    # dataset: 13 runs of the window (one going), 13 finished tool calls of 15 (a skipped, a pending
    # one and the approvals' pending calls are not), 24 model calls of the window's runs.
    expected = {"runs_total": 13, "finished_runs": 12, "succeeded_runs": 7, "success_rate": 7 / 12,
                "test_calls_per_run": 13 / 13}
    assert values(raw) == pytest.approx(expected)
    build_window()
    assert built_days(START, END)
    rolled = metrics_summary(start=START, end=END)
    assert rolled.latency_estimated  # read from the rollups
    assert values(rolled, None) == values(raw, None)  # every figure declared
    alpha, _beta = dataset
    assert values(metrics_summary(start=START, end=END, agent=alpha), None) == values(
        metrics_summary(start=START, end=END, agent=alpha, rollups=False), None)
    # The month's rows hold what its days' rows do: the window's ended runs (the one going is read raw).
    ended = Run.objects.filter(created_at__gte=at(1, 0), created_at__lt=at(8, 0), status__in=Run.FINISHED_STATUSES)
    stored = dict(FigureRollup.objects.filter(whole_month=True).values_list("name").annotate(n=Sum("value")))
    assert {name: n for name, n in stored.items() if name.startswith("test_") or name.endswith("runs")} == {
        "runs": 12, "finished_runs": 12, "succeeded_runs": 7,
        "test_model_calls": Step.objects.filter(run__in=ended).count(),
        "test_finished_calls": ToolCall.objects.filter(run__in=ended, status__in=FINISHED_CALLS).count(),
        "test_own_iterations": sum(range(1, 11)) + 2 * 20,
    }


def test_a_declared_figure_is_a_tile_on_the_page_and_a_key_of_the_api(declared, dataset, client):  # noqa: F811
    build_window()
    client.force_login(user_in("viewers", "vera"))
    html = client.get(reverse("metrics"), WINDOW).content.decode()
    assert 'id="figure-test_calls_per_run"' in html and "Tool calls per run" in html
    assert '<div class="metric" data-value="1.0">1.00</div>' in html
    assert "Finished tool calls per run created." in html
    assert 'id="figure-success_rate"' not in html  # laid out by hand in its card
    body = client.get("/api/v1/metrics/", WINDOW).json()
    assert body["test_calls_per_run"] == 1.0 and body["runs_total"] == 13 and body["success_rate"] == 7 / 12


def test_days_counted_before_a_total_was_declared_are_read_raw_until_rebuilt(dataset, monkeypatch):  # noqa: F811
    build_window()
    before = set(built_days(START, END))
    monkeypatch.setattr(figures, "TOTALS", figures.TOTALS + EXTRA_TOTALS)
    monkeypatch.setattr(figures, "FIGURES", figures.FIGURES + (CALLS_PER_RUN,))
    assert built_days(START, END) == []  # their rows lack the new totals
    raw = values(metrics_summary(start=START, end=END, rollups=False))
    assert values(metrics_summary(start=START, end=END)) == raw  # read raw meanwhile: exact
    while rollups.build_pending(limit=3):  # the workers' periodic task
        pass
    assert set(built_days(START, END)) == before
    assert values(metrics_summary(start=START, end=END)) == raw == pytest.approx(
        {"runs_total": 13, "finished_runs": 12, "succeeded_runs": 7, "success_rate": 7 / 12, "test_calls_per_run": 1})


def test_the_migration_fills_the_totals_as_a_rebuild_counts_them(dataset):  # noqa: F811
    migration = importlib.import_module("runs.migrations.0047_figure_rollups")
    filled = FigureRollup.objects.filter(name__in=migration.TOTALS_KEY.split(","))
    build_window()
    rebuilt = sorted(filled.values_list("day", "whole_month", "agent_id", "name", "value"))
    assert rebuilt
    FigureRollup.objects.all().delete()
    RollupDay.objects.update(totals="")  # as before the migration
    assert built_days(START, END) == []
    migration.totals_from_run_rollups(django_apps, None)
    assert sorted(filled.values_list("day", "whole_month", "agent_id", "name", "value")) == rebuilt
    # Read from the rollups again without a rebuild, while figures.py declares these totals only;
    # a total declared since then has the days read raw until they are rebuilt.
    assert bool(built_days(START, END)) == (migration.TOTALS_KEY == figures.totals_key())


def test_no_total_over_runs_counts_what_a_summary_changes_after_the_end():
    """A summary written after a run ended adds to its tokens and cost, which the rollups take in
    through DayRollup and RunRollup only: a total over RUNS counting them would go stale."""
    for total in figures.TOTALS:
        assert total.rows in (RUNS, STEPS, CALLS), total.name
        if total.rows == RUNS:
            assert not re.search(r"tokens|cost", repr(total.aggregate)), total.name
    assert len({total.name for total in figures.TOTALS}) == len(figures.TOTALS)
    assert len({figure.name for figure in figures.FIGURES}) == len(figures.FIGURES)
