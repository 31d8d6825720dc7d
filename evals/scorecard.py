"""The scorecard of an experiment (pass rate; iterations, tokens, cost and time as distributions)
and the comparison of two experiments of one dataset: regressions first, then fixed, then unchanged.
Plain functions over the results' rows."""
from dataclasses import dataclass, field

from evals.models import CaseResult, Experiment

MEASURES = (("iterations", "Iterations"), ("tokens", "Tokens"), ("cost_usd", "Cost (USD)"), ("seconds", "Time (s)"))


@dataclass(frozen=True)
class Distribution:
    label: str
    name: str
    count: int
    total: float
    minimum: float
    median: float
    p90: float
    maximum: float

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


def distribution(name: str, label: str, values: list[float]) -> Distribution:
    ordered = sorted(values)
    if not ordered:
        return Distribution(label, name, 0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return Distribution(label, name, len(ordered), sum(ordered), ordered[0], at(0.5), at(0.9), ordered[-1])


@dataclass
class Scorecard:
    experiment: Experiment
    results: list[CaseResult]
    distributions: list[Distribution] = field(default_factory=list)

    @property
    def scored(self) -> list[CaseResult]:
        return [r for r in self.results if r.status == CaseResult.Status.SCORED]

    @property
    def failing(self) -> list[CaseResult]:
        return [r for r in self.scored if not r.passed]


def scorecard(experiment: Experiment) -> Scorecard:
    results = list(experiment.results.select_related("run").order_by("pk"))
    scored = [r for r in results if r.status == CaseResult.Status.SCORED and r.run_id is not None]
    return Scorecard(experiment, results, [distribution(name, label, [getattr(r, name) for r in scored])
                                           for name, label in MEASURES])


@dataclass(frozen=True)
class CasePair:
    case_name: str
    change: str  # "regressed", "fixed", "still failing", "still passing", "only in one"
    before: CaseResult | None
    after: CaseResult | None

    @property
    def cost_delta(self) -> float | None:
        return self.after.cost_usd - self.before.cost_usd if self.before and self.after else None

    @property
    def seconds_delta(self) -> float | None:
        return self.after.seconds - self.before.seconds if self.before and self.after else None


ORDER = {"regressed": 0, "fixed": 1, "still failing": 2, "still passing": 3, "only in one": 4, "not scored yet": 5}


@dataclass
class Comparison:
    before: Experiment
    after: Experiment
    pairs: list[CasePair]

    def count(self, change: str) -> int:
        return sum(1 for p in self.pairs if p.change == change)

    @property
    def regressions(self) -> list[CasePair]:
        return [p for p in self.pairs if p.change == "regressed"]

    @property
    def fixed(self) -> list[CasePair]:
        return [p for p in self.pairs if p.change == "fixed"]

    @property
    def before_results(self):
        return [p.before for p in self.pairs if p.before is not None and p.before.status == CaseResult.Status.SCORED]

    @property
    def after_results(self):
        return [p.after for p in self.pairs if p.after is not None and p.after.status == CaseResult.Status.SCORED]

    @property
    def cost_delta(self) -> float:
        return sum(r.cost_usd for r in self.after_results) - sum(r.cost_usd for r in self.before_results)

    @property
    def seconds_delta(self) -> float:
        return sum(r.seconds for r in self.after_results) - sum(r.seconds for r in self.before_results)


def compare(before: Experiment, after: Experiment) -> Comparison:
    """Each case of either experiment, matched by case (its name when the case was deleted)."""
    def keyed(experiment):
        return {(r.case_id or r.case_name): r for r in experiment.results.select_related("run").order_by("pk")}

    old, new = keyed(before), keyed(after)
    pairs = []
    for key in list(dict.fromkeys([*old, *new])):
        a, b = old.get(key), new.get(key)
        pairs.append(CasePair((b or a).case_name, _change(a, b), a, b))
    pairs.sort(key=lambda p: ORDER[p.change])
    return Comparison(before, after, pairs)


def _change(before: CaseResult | None, after: CaseResult | None) -> str:
    if before is None or after is None:
        return "only in one"
    if CaseResult.Status.RUNNING in (before.status, after.status):
        return "not scored yet"
    if before.passed and not after.passed:
        return "regressed"
    if after.passed and not before.passed:
        return "fixed"
    return "still passing" if after.passed else "still failing"
