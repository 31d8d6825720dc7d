"""The metrics page's figures of a window, each declared once: the one place to add a figure.

A figure is a value computed from totals, and a total is one aggregate over the window's rows (a
Count or a Sum). Everything else follows from these declarations:
- the raw path (page.py) aggregates each total over the window's rows, one query per kind of row;
- the rollups (rollup_rows.py) store each total per day and agent (FigureRollup: a row per total,
  no column per figure, so no migration), and the rolled-up path (rollup_reads.py) sums them and
  adds the totals of the runs it reads raw; totals are sums, so they add up over days and agents;
- the page shows every figure with `tile` as a tile of its own, and the API answers every figure
  under its name (a figure the page lays out by hand has tile=False);
- a day's rollups say which totals they hold (totals_key): the days counted before a total was
  declared are read raw, which is exact, until the workers' periodic task rebuilds them.

The rows a total may count (each run's own work: runs/observability/metrics/own_work.py):
- RUNS: the window's runs, their row as it ended. Not their tokens or cost: a summary added after
  the end changes those (the rollups add it through DayRollup and RunRollup, not through totals).
- STEPS: their own model calls, the summary's included.
- CALLS: their own tool calls.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Aggregate, Count, Q
from django.utils.formats import number_format

from runs.models import Run

RUNS, STEPS, CALLS = "runs", "steps", "calls"
COUNT, SHARE, PER_RUN = "count", "share", "per run"  # units: how a value is shown


@dataclass(frozen=True)
class Total:
    name: str
    rows: str  # RUNS, STEPS or CALLS
    aggregate: Aggregate  # over those rows, added up over days and agents
    integer: bool = True  # a count: stored as a float, read back as an int


@dataclass(frozen=True)
class Figure:
    name: str  # its key in the API, its id on the page
    label: str
    unit: str  # COUNT, SHARE (a fraction, shown as a percent) or PER_RUN
    value: Callable[[dict], float | int | None]  # from {total name: value}
    note: str = ""  # what it counts, in words, under the value
    tile: bool = True


def share(part, whole) -> float | None:
    return part / whole if whole else None


TOTALS = (
    Total("runs", RUNS, Count("pk")),
    Total("finished_runs", RUNS, Count("pk", filter=Q(status__in=Run.FINISHED_STATUSES))),
    Total("succeeded_runs", RUNS, Count("pk", filter=Q(status=Run.Status.SUCCEEDED))),
)

# In the API's order. The first four are the page's "Success rate" card, laid out by hand.
FIGURES = (
    Figure("runs_total", "Runs created", COUNT, lambda t: t["runs"], tile=False),
    Figure("finished_runs", "Finished runs", COUNT, lambda t: t["finished_runs"], tile=False),
    Figure("succeeded_runs", "Succeeded runs", COUNT, lambda t: t["succeeded_runs"], tile=False),
    Figure(
        "success_rate", "Success rate", SHARE, lambda t: share(t["succeeded_runs"], t["finished_runs"]),
        note="Succeeded among finished runs (runs still going are left out).", tile=False,
    ),
)


def totals_key() -> str:
    """What a day's rollups are counted with (RollupDay.totals): the names of the totals declared."""
    return ",".join(sorted(total.name for total in TOTALS))


@dataclass(frozen=True)
class FigureValue:
    figure: Figure
    value: float | int | None

    @property
    def name(self) -> str:
        return self.figure.name

    @property
    def label(self) -> str:
        return self.figure.label

    @property
    def note(self) -> str:
        return self.figure.note

    @property
    def shown(self) -> str:
        """The value as the page writes it."""
        if self.value is None:
            return "—"
        if self.figure.unit == COUNT:
            return number_format(int(self.value), 0, force_grouping=True)
        if self.figure.unit == SHARE:
            return f"{100 * self.value:.1f}%"
        return f"{self.value:,.2f}"


def figure_values(totals: dict) -> dict[str, FigureValue]:
    """{figure name: its FigureValue} from {total name: value} (a total not counted is 0)."""
    found = {total.name: _typed(total, totals.get(total.name, 0)) for total in TOTALS}
    return {figure.name: FigureValue(figure, figure.value(found)) for figure in FIGURES}


def _typed(total: Total, value):
    return round(value or 0) if total.integer else float(value or 0.0)
