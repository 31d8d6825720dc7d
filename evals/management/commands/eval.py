"""manage.py eval DATASET --agent NAME: run every case of a dataset against a version of an agent
(an experiment, through the workers or --inline in this process), print its scorecard and its
comparison with a baseline, optionally write JUnit XML, and exit 1 on a regression or a pass rate
under --min-pass-rate (evals.verdict decides; this command only asks and prints)."""
import math
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from evals.experiments import ExperimentInvalid, baseline_for, experiment_cancel, experiment_start
from evals.junit import failed_checks, junit_write, not_ended, regressions
from evals.models import Dataset, Experiment
from evals.scorecard import Comparison, Distribution, Scorecard, compare, scorecard
from evals.scoring import experiment_catch_up
from evals.verdict import percent, verdict
from runs.engine.loop import run_advance
from runs.models import Agent, Run

POLL_SECONDS = 0.5
INLINE_THREADS = 8
NO_WORKER_HINT_SECONDS = 30.0


def _bad(message: str) -> CommandError:
    return CommandError(message, returncode=2)


class Command(BaseCommand):
    help = ("Run every case of a dataset against a version of an agent (an experiment), print the scorecard and "
            "the comparison with a baseline; exit 1 on a regression or a pass rate under --min-pass-rate.")

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version is the agent's version here: it replaces Django's base --version option.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("dataset", help="The dataset's name (or id)")
        parser.add_argument("--agent", required=True, help="The agent's name")
        parser.add_argument("--version", type=int, dest="agent_version", metavar="N", help="The agent's version, by number")
        parser.add_argument("--draft", action="store_true", help="The agent's newest draft")
        parser.add_argument("--model", action="append", dest="models", metavar="MODEL",
                            help="A model for every case (repeat for fallbacks), instead of the version's")
        parser.add_argument("--against", type=int, metavar="EXPERIMENT_ID", help="The id of the experiment to compare with (same dataset)")
        parser.add_argument("--min-pass-rate", metavar="RATE", help="Fail when under this share of cases passed (0 to 1)")
        parser.add_argument("--junit", metavar="FILE", help="Write JUnit XML here (one test case per case)")
        parser.add_argument("--timeout", default="1800", metavar="SECONDS", help="Seconds to wait for the cases (default 1800)")
        parser.add_argument("--inline", action="store_true",
                            help="Run the cases in this process (for machines without workers)")

    def handle(self, *args, **options):
        dataset = _dataset(options["dataset"])
        agent = _agent(options["agent"])
        version, draft = options["agent_version"], options["draft"]
        if version is not None and draft:
            raise _bad("give --version N or --draft, not both")
        if version is not None and version < 1:
            raise _bad(f"--version must be a version number of at least 1, got {version}")
        models = None
        if options["models"]:
            models = [m.strip() for m in options["models"]]
            if not all(models):
                raise _bad("--model must not be empty")
        min_pass_rate = _rate(options["min_pass_rate"])
        timeout = _timeout(options["timeout"])
        against = _against(options["against"], dataset)
        junit = options["junit"]
        if junit and not Path(junit).resolve().parent.is_dir():
            raise _bad(f"--junit: the directory of {junit} does not exist")
        try:
            experiment = experiment_start(dataset=dataset, agent=agent, version=version, draft=draft,
                                          overrides={"models": models} if models else {}, baseline=against, user=None)
        except ExperimentInvalid as exc:
            raise _bad(str(exc)) from None
        where = "in this process" if options["inline"] else "on the workers"
        self._say(f"Experiment {experiment.pk} started: {experiment.label} of agent {agent.name} on dataset "
                  f"{dataset.name} ({experiment.cases_total} cases, {where}): {_link(experiment)}")

        ended = self._wait(experiment, timeout=timeout, inline=options["inline"])
        experiment.refresh_from_db()
        card = scorecard(experiment)
        if not ended:
            done = sum(1 for r in card.results if not not_ended(r))
            self._say(f"Timed out after {timeout:g} s with {done}/{len(card.results)} cases done: "
                      f"experiment {experiment.pk} cancelled.")
        baseline = baseline_for(experiment)
        comparison = compare(baseline, experiment) if baseline is not None else None
        self._say(scorecard_text(card, comparison))
        if junit:
            junit_write(junit, card, comparison)
            self._say(f"JUnit XML written to {junit}")
        outcome = verdict(card=card, comparison=comparison, min_pass_rate=min_pass_rate, timed_out=not ended,
                          timeout=timeout)
        self._say(outcome.line)
        if not outcome.ok:
            raise SystemExit(outcome.exit_code)

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def _wait(self, experiment: Experiment, *, timeout: float, inline: bool) -> bool:
        """Until every case is scored (True), or the timeout (the experiment is cancelled: False).
        Scores any case whose scoring task was lost on the way; --inline drives the runs here."""
        started = time.monotonic()
        deadline = started + timeout
        shown, hinted, errors = None, inline, set()
        pool = ThreadPoolExecutor(max_workers=INLINE_THREADS, thread_name_prefix="eval") if inline else None
        driving: dict[int, Future] = {}
        try:
            while True:
                if pool is not None:
                    self._drive_waiting(experiment, pool, driving, errors)
                # Inline, this process ended the runs: it scores them at once, judge included.
                experiment_catch_up(experiment, **({"waited": 0, "judge": True} if inline else {}))
                experiment.refresh_from_db()
                progress = (experiment.cases_done, experiment.cases_failed)
                if progress != shown:
                    shown = progress
                    self._say(f"{experiment.cases_done}/{experiment.cases_total} cases done, "
                              f"{experiment.cases_failed} failing")
                if experiment.status != Experiment.Status.RUNNING:
                    return True
                now = time.monotonic()
                if now >= deadline:
                    experiment_cancel(experiment=experiment)
                    experiment_catch_up(experiment, waited=0, judge=inline)
                    return False
                if not hinted and now - started >= NO_WORKER_HINT_SECONDS:
                    hinted = True
                    if not _runs(experiment).exclude(status=Run.Status.QUEUED).exists():
                        self._say(f"No worker has taken a case after {NO_WORKER_HINT_SECONDS:g} s: are the workers "
                                  "running? (--inline runs the cases in this process)")
                pause = min(POLL_SECONDS, max(0.0, deadline - now))
                if driving:
                    wait(driving.values(), timeout=pause, return_when=FIRST_COMPLETED)
                else:
                    time.sleep(pause)
        except KeyboardInterrupt:
            experiment_cancel(experiment=experiment)
            self.stderr.write(f"Interrupted: experiment {experiment.pk} cancelled.")
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def _drive_waiting(self, experiment: Experiment, pool: ThreadPoolExecutor, driving: dict[int, Future],
                       errors: set) -> None:
        """--inline: hand each run that nobody drives (queued, or its lease ran out) to a thread here."""
        for run_id, future in list(driving.items()):
            if future.done():
                del driving[run_id]
                exc = future.exception()
                if exc is not None and (run_id, repr(exc)) not in errors:
                    errors.add((run_id, repr(exc)))
                    self.stderr.write(f"run {run_id} failed here: {type(exc).__name__}: {exc}")
        free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=timezone.now())
        waiting = (_runs(experiment).filter(free, status__in=(Run.Status.QUEUED, Run.Status.RUNNING))
                   .exclude(pk__in=list(driving)).order_by("pk").values_list("pk", flat=True))
        for run_id in list(waiting):
            driving[run_id] = pool.submit(_drive, run_id)


def _drive(run_id: int) -> None:
    try:
        run_advance(run_id=run_id)
    finally:
        connection.close()  # this thread's own connection


def _runs(experiment: Experiment):
    return Run.objects.filter(case_result__experiment=experiment)


def _dataset(value: str) -> Dataset:
    dataset = Dataset.objects.filter(name=value).first()
    if dataset is None and value.strip().isdigit():
        dataset = Dataset.objects.filter(pk=int(value)).first()
    if dataset is None:
        names = list(Dataset.objects.order_by("name").values_list("name", flat=True)[:21])
        shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") if names else "none"
        raise _bad(f"no dataset named {value!r} (datasets: {shown})")
    return dataset


def _agent(name: str) -> Agent:
    agent = Agent.objects.filter(name=name).first()
    if agent is None:
        names = ", ".join(Agent.objects.order_by("name").values_list("name", flat=True)) or "none"
        raise _bad(f"no agent named {name!r} (agents: {names})")
    return agent


def _rate(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        rate = float(raw)
    except ValueError:
        rate = math.nan
    if not math.isfinite(rate) or not 0 <= rate <= 1:
        raise _bad(f"--min-pass-rate must be a number from 0 to 1 (0.8 for 80%), got {raw!r}")
    return rate


def _timeout(raw: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise _bad(f"--timeout must be a number of seconds above 0, got {raw!r}")
    return seconds


def _against(pk: int | None, dataset: Dataset) -> Experiment | None:
    if pk is None:
        return None
    experiment = Experiment.objects.select_related("dataset").filter(pk=pk).first()
    if experiment is None:
        raise _bad(f"--against: no experiment {pk}")
    if experiment.dataset_id != dataset.pk:
        raise _bad(f"--against: experiment {pk} is of dataset {experiment.dataset.name!r}, not {dataset.name!r}")
    return experiment


def _link(experiment: Experiment) -> str:
    # An address to open from a CI log: the site's (SITE_URL), as in notifications.
    return settings.SITE_URL.rstrip("/") + reverse("experiment_detail", args=[experiment.pk])


def _value(distribution: Distribution, value: float) -> str:
    if distribution.name == "cost_usd":
        return f"${value:.6f}"
    if distribution.name == "seconds":
        return f"{value:.2f} s"
    return f"{value:.0f}"


def _delta(name: str, value: float) -> str:
    sign = "+" if value >= 0 else "-"
    return f"{sign}${abs(value):.6f}" if name == "cost_usd" else f"{sign}{abs(value):.2f} s"


def scorecard_text(card: Scorecard, comparison: Comparison | None) -> str:
    """The scorecard as the command prints it: pass rate, distributions, failing cases with their
    failed checks, cases whose run did not end, then the comparison with the baseline."""
    experiment = card.experiment
    total = len(card.results)
    passed = sum(1 for r in card.scored if r.passed)
    lines = [
        "",
        f"Experiment {experiment.pk}: {experiment.label} (agent {experiment.agent.name}, dataset "
        f"{experiment.dataset.name}, {experiment.status})",
        f"{passed}/{total} cases passed ({percent(passed / total if total else 0.0)})",
    ]
    width = max(len(d.label) for d in card.distributions) if card.distributions else 0
    for d in card.distributions:
        lines.append(f"  {d.label:<{width}}  median {_value(d, d.median)}, p90 {_value(d, d.p90)}, "
                     f"max {_value(d, d.maximum)}")
    failing = [r for r in card.failing if not not_ended(r)]
    if failing:
        lines.append(f"Failing cases ({len(failing)}):")
        for result in failing:
            lines.append(f"  {result.case_name} ({result.stop_reason_label or 'no stop reason'})")
            lines.extend(f"    - {check}" for check in failed_checks(result) or ["the case failed"])
    unfinished = [r for r in card.results if not_ended(r)]
    if unfinished:
        lines.append(f"Did not end ({len(unfinished)}):")
        lines.extend(f"  {r.case_name}: {not_ended(r)}" for r in unfinished)
    if comparison is None:
        lines.append("No baseline to compare with (--against EXPERIMENT, or a finished experiment of this agent "
                     "on this dataset).")
    else:
        before = comparison.before
        counts = ", ".join(f"{comparison.count(change)} {change}" for change in
                           ("regressed", "fixed", "still failing", "still passing") if comparison.count(change))
        lines.append(f"Compared with experiment {before.pk} ({before.label}): {counts or 'nothing in common'}")
        for title, pairs in (("Regressions", regressions(comparison)), ("Fixed", comparison.fixed)):
            if pairs:
                lines.append(f"  {title} ({len(pairs)}):")
                lines.extend(f"    - {p.case_name} (cost {_delta('cost_usd', p.cost_delta or 0.0)}, "
                             f"time {_delta('seconds', p.seconds_delta or 0.0)})" for p in pairs)
        lines.append(f"  Cost {_delta('cost_usd', comparison.cost_delta)}, time {_delta('seconds', comparison.seconds_delta)}"
                     f" against experiment {before.pk}")
    lines.append(f"Dashboard: {_link(experiment)}")
    return "\n".join(lines)
