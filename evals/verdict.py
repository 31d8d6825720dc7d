"""Whether an experiment passes, for `manage.py eval` and CI: no case regressed against its
baseline, every case's run ended and was scored, and (when asked) the pass rate is at least a
minimum. A plain function over the scorecard and the comparison; the command only prints it."""
from dataclasses import dataclass

from evals.junit import not_ended, regressions
from evals.scorecard import Comparison, Scorecard


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reasons: tuple[str, ...]  # why it failed, in words; empty when it passed
    passed: int
    total: int
    # What it was held to, in words ("no regression against experiment 7"); empty when nothing.
    held_to: tuple[str, ...] = ()
    # The baseline's own count, when there is one: ", as in experiment 7" or " (1 of 2 in experiment 7)".
    baseline_count: str = ""

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def line(self) -> str:
        """The line printed last, the one a CI log is read by: the verdict, what it was held to,
        then the cases' count. A case failing its checks alone does not fail the command, so an
        "OK" may come with failed cases and says so in words ("PASSED: 0/2 cases passed" read as a
        contradiction): "OK, no regression against experiment 7: 0 of 2 cases passed their checks
        and 2 failed, as in experiment 7." """
        if not self.ok:
            return "FAILED: " + "; ".join(self.reasons)
        held = ", ".join(self.held_to) or "nothing to fail on (no baseline to compare with, no --min-pass-rate)"
        return f"OK, {held}: {cases_passed(self.passed, self.total)}{self.baseline_count}."


def cases_passed(passed: int, total: int) -> str:
    """ "1 of 2 cases passed their checks and 1 failed", "1 of 1 case passed its checks"."""
    failed = total - passed
    said = f"{passed} of {total} case{'s' if total != 1 else ''} passed {'their' if total != 1 else 'its'} checks"
    return f"{said} and {failed} failed" if failed else said


def percent(rate: float, *, other: float | None = None) -> str:
    """A rate as a percentage, with a decimal when the whole number would hide a difference from `other`."""
    shown = f"{rate * 100:.0f}%"
    if other is not None and rate != other and shown == f"{other * 100:.0f}%":
        shown = f"{rate * 100:.1f}%"
    return shown


def verdict(*, card: Scorecard, comparison: Comparison | None = None, min_pass_rate: float | None = None,
            timed_out: bool = False, timeout: float | None = None) -> Verdict:
    """The experiment's verdict: failed on a regression against `comparison`'s baseline, a case
    that did not end (timed out, cancelled), or a pass rate under `min_pass_rate` (0..1)."""
    total = len(card.results)
    passed = sum(1 for r in card.scored if r.passed)
    ended = sum(1 for r in card.results if not not_ended(r))
    reasons = []
    if regressions(comparison):
        count = len(regressions(comparison))
        reasons.append(f"{count} regression{'s' if count != 1 else ''} against experiment {comparison.before.pk}")
    if timed_out:
        after = f" after {timeout:g} s" if timeout is not None else ""
        reasons.append(f"timed out{after} with {ended}/{total} cases done (the experiment was cancelled)")
    elif ended < total:
        reasons.append(f"{total - ended} of {total} cases did not end (the experiment is {card.experiment.status})")
    rate = passed / total if total else 0.0
    if min_pass_rate is not None and rate < min_pass_rate:
        reasons.append(f"pass rate {percent(rate, other=min_pass_rate)} is under {percent(min_pass_rate, other=rate)}")
    held_to, baseline_count = [], ""
    if comparison is not None:
        before = comparison.before.pk
        held_to.append(f"no regression against experiment {before}")
        before_total = sum(1 for p in comparison.pairs if p.before is not None)
        before_passed = sum(1 for r in comparison.before_results if r.passed)
        baseline_count = (f", as in experiment {before}" if (before_passed, before_total) == (passed, total)
                          else f" ({before_passed} of {before_total} in experiment {before})")
    if min_pass_rate is not None:
        held_to.append(f"pass rate {percent(rate, other=min_pass_rate)} is at least {percent(min_pass_rate, other=rate)}")
    return Verdict(not reasons, tuple(reasons), passed, total, tuple(held_to), baseline_count)
