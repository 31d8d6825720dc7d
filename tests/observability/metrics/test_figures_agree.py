"""One count of every figure: the metrics page (from the runs' own rows and from the daily rollups,
kept by the counter after each ending, and rebuilt), /metrics and the budget alerts count the same work, and it is
what the runs did themselves.

Random runs (seeded) over the last days: runs of several agents, forks of them and forks of forks
(made by the real fork service, so they start with copies of their parent's steps, calls,
iterations, tokens and cost), re-runs, runs ended through the real ending transaction (some with a
summary afterwards), runs still going, and pruned runs (deleted through the archive service, parents
of forks among them). The generator knows which steps and calls each run made itself; every path
must give exactly the figures of that work (costs up to float rounding).
"""

import importlib
import random
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.db.models import F
from django.utils import timezone

from runs.engine.loop import run_end
from runs.engine.storage.db import write_transaction
from runs.lifecycle import forks as forks_module
from runs.lifecycle.archive import runs_delete
from runs.lifecycle.forks import run_fork
from runs.lifecycle.reruns import rerun_create
from runs.models import Agent, Approval, BudgetAlert, RollupDay, Run, Step, ToolCall, UncountedRun
from runs.models.rollups import DayRollup, FigureRollup
from runs.observability.metrics import counter, figures, rollups
from runs.observability.metrics import rollup_reads as metrics_rollups
from runs.observability.metrics.aggregates import nearest_rank_offset
from runs.observability.metrics.budget_alerts import budget_alerts_check
from runs.observability.metrics.figures import COUNT, Figure
from runs.observability.metrics.page import metrics_summary
from tests.observability.metrics.test_declared_figures import EXTRA_TOTALS, declared  # noqa: F401 (a fixture)
from tests.observability.metrics.test_rollups import snapshot, step_snapshot, tool_snapshot
from tests.observability.prometheus.test_prometheus import scrape, token  # noqa: F401 (a fixture)
from toolsapp.models import Tool

pytestmark = pytest.mark.django_db

OWNER = "figures-test"
DAYS = 4  # runs over the last DAYS days, today included
MODELS = ["gpt-a", "gpt-b", "small"]
TOOL_NAMES = ["get_weather", "search_tickets", "cancel_order", "made_up_tool"]
DONE = [s for s in ToolCall.DONE_STATUSES] + [ToolCall.Status.SUCCEEDED] * 3
OPEN = [ToolCall.Status.PENDING, ToolCall.Status.STARTED, ToolCall.Status.AWAITING_APPROVAL]
INHERITED = ("inherited_iterations", "inherited_tokens_in", "inherited_tokens_out", "inherited_cost_usd")
ENDINGS = [Run.StopReason.FINAL_ANSWER] * 3 + [Run.StopReason.CANCELLED, Run.StopReason.ITERATION_LIMIT,
                                                 Run.StopReason.MODEL_ERROR]


class World:
    """The runs made, and which of their steps and calls each made itself."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.runs: list[Run] = []
        self.own_steps: set[int] = set()
        self.own_calls: set[int] = set()
        self.own_iterations: Counter = Counter()
        self.pruned: dict = {}  # the figures of the pruned runs, taken before they were deleted

    def adopt(self, run: Run, day_offset: int) -> Run:
        now = timezone.now()
        since_midnight = int((now - timezone.localtime(now).replace(hour=0, minute=0, second=0)).total_seconds())
        # random() draws the same bits at any hour: randrange's would vary with the bound, and so
        # would the whole world (before 01:00 a seed's world had no fork of a fork).
        created = now - timedelta(days=day_offset, seconds=int(self.rng.random() * (min(3600, since_midnight) + 1)))
        Run.objects.filter(pk=run.pk).update(created_at=created, lease_owner=OWNER, status=Run.Status.RUNNING)
        run.refresh_from_db()
        self.runs.append(run)
        return run

    def root(self, agent: Agent) -> Run:
        return self.adopt(Run.objects.create(agent=agent, task="t"), self.rng.randrange(DAYS))

    def work(self, run: Run, iterations: int, *, leave_open: bool = False) -> None:
        """`iterations` iterations of `run` itself, as the loop records them: a model call each
        with its tool calls, and the run's counters grown by as much."""
        rng = self.rng
        index = Step.objects.filter(run=run).order_by("-index").values_list("index", flat=True).first() or 0
        tokens_in = tokens_out = 0
        cost = 0.0
        for n in range(1, iterations + 1):
            step = Step.objects.create(
                run=run, index=index + n, iteration=run.iterations + n, model=rng.choice(MODELS),
                latency_ms=rng.choice([0.0, rng.uniform(1, 5000), float(rng.randrange(50, 900))]),
                tokens_in=rng.randrange(1, 3000), tokens_out=rng.randrange(1, 900), cost_usd=rng.random() / 50,
                message={"role": "assistant"},
            )
            self.own_steps.add(step.pk)
            tokens_in, tokens_out, cost = tokens_in + step.tokens_in, tokens_out + step.tokens_out, cost + step.cost_usd
            last = n == iterations
            for c in range(rng.randrange(3)):
                status = rng.choice(OPEN if leave_open and last else DONE)
                call = ToolCall.objects.create(
                    run=run, step=step, index=c, call_id=f"call-{step.pk}-{c}", tool_name=rng.choice(TOOL_NAMES),
                    arguments="{}", args_hash="h", idempotency_key=f"{run.pk}-{step.index}-{c}", status=status,
                    latency_ms=rng.uniform(1, 900) if status == ToolCall.Status.SUCCEEDED else None,
                )
                self.own_calls.add(call.pk)
                if rng.random() < 0.25 and status in DONE:
                    decided = rng.choice([Approval.Status.APPROVED, Approval.Status.REJECTED])
                    approval = Approval.objects.create(run=run, tool_call=call, status=decided,
                                                       automatic=rng.random() < 0.3)
                    Approval.objects.filter(pk=approval.pk).update(
                        decided_at=approval.requested_at + timedelta(seconds=rng.randrange(1, 900)))
                    ToolCall.objects.filter(pk=call.pk).update(approval=approval)
        Run.objects.filter(pk=run.pk).update(
            iterations=F("iterations") + iterations, tokens_in=F("tokens_in") + tokens_in,
            tokens_out=F("tokens_out") + tokens_out, cost_usd=F("cost_usd") + cost,
        )
        run.refresh_from_db()
        self.own_iterations[run.pk] += iterations

    def fork(self, parent: Run) -> Run:
        indexes = list(Step.objects.filter(run=parent, iteration__gte=1).values_list("index", flat=True))
        fork = run_fork(run_id=parent.pk, step_index=self.rng.choice(indexes), user=None)
        parent_age = (timezone.localdate() - timezone.localtime(parent.created_at).date()).days
        return self.adopt(fork, self.rng.randrange(parent_age + 1))  # made on its parent's day or later

    def rerun(self, original: Run) -> Run:
        original_age = (timezone.localdate() - timezone.localtime(original.created_at).date()).days
        return self.adopt(rerun_create(original=original), self.rng.randrange(original_age + 1))

    def end(self, run: Run) -> None:
        run_end(run_id=run.pk, owner=OWNER, reason=self.rng.choice(ENDINGS))
        run.refresh_from_db()
        if self.rng.random() < 0.3:  # a summary afterwards: one more model call, no iteration
            self.summary(run)

    def summary(self, run: Run) -> None:
        with write_transaction():
            index = Step.objects.filter(run=run).order_by("-index").values_list("index", flat=True).first() or 0
            step = Step.objects.create(run=run, index=index + 1, iteration=run.iterations, kind=Step.Kind.SUMMARY,
                                       model="summariser", latency_ms=321.0, tokens_in=400, tokens_out=60,
                                       cost_usd=0.004, message={"role": "assistant", "content": "summary"})
            Run.objects.filter(pk=run.pk).update(tokens_in=F("tokens_in") + 400, tokens_out=F("tokens_out") + 60,
                                                 cost_usd=F("cost_usd") + 0.004)
            run.refresh_from_db()
            rollups.count_summary(run=run, step=step, tokens=460, cost_usd=0.004)
        self.own_steps.add(step.pk)

    def prune(self, runs: list[Run]) -> None:
        ids = {r.pk for r in runs}
        self.pruned = figures_of(self, ids, merge_into=self.pruned)
        runs_delete(run_ids=sorted(ids))
        self.runs = [r for r in self.runs if r.pk not in ids]


def figures_of(world: World, run_ids: set[int], *, merge_into: dict | None = None) -> dict:
    """What the runs `run_ids` did themselves, counted from the rows the generator made them."""
    found = merge_into or {
        "status": Counter(), "stop": Counter(), "outcomes": Counter(), "ended": Counter(),
        "iterations": Counter(), "finished_iterations": [], "day": defaultdict(lambda: [0, 0, 0.0]),
        "agent_today": defaultdict(lambda: [0, 0.0]), "tokens": Counter(), "cost": Counter(),
        "model_calls": Counter(), "tools": Counter(), "tool_calls": Counter(), "approvals": Counter(),
    }
    today = timezone.localdate()
    runs = {r.pk: r for r in Run.objects.filter(pk__in=run_ids).select_related("agent")}
    names = set(Tool.objects.values_list("name", flat=True))
    for run in runs.values():
        own_iterations = world.own_iterations[run.pk]
        found["status"][run.status] += 1
        found["stop"][run.stop_reason] += 1
        found["outcomes"][run.status, run.stop_reason, own_iterations] += 1
        found["iterations"][run.agent.name] += own_iterations
        if run.status in Run.FINISHED_STATUSES:
            found["ended"][run.agent.name, run.status, run.stop_reason] += 1
            found["finished_iterations"].append(own_iterations)
        found["day"][timezone.localtime(run.created_at).date()][0] += 1
    for step in Step.objects.filter(run_id__in=run_ids, pk__in=world.own_steps).select_related("run__agent"):
        run, tokens = step.run, step.tokens_in + step.tokens_out
        day = timezone.localtime(run.created_at).date()
        found["day"][day][1] += tokens
        found["day"][day][2] += step.cost_usd
        if day == today:
            found["agent_today"][run.agent.name][0] += tokens
            found["agent_today"][run.agent.name][1] += step.cost_usd
        found["tokens"][run.agent.name, step.model, "input"] += step.tokens_in
        found["tokens"][run.agent.name, step.model, "output"] += step.tokens_out
        found["cost"][run.agent.name, step.model] += step.cost_usd
        found["model_calls"][step.model] += 1
        found.setdefault("latencies", defaultdict(list))[step.model].append(step.latency_ms)
    for call in ToolCall.objects.filter(run_id__in=run_ids, pk__in=world.own_calls):
        if call.status in (ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED, ToolCall.Status.REJECTED):
            found["tools"][call.tool_name, "finished"] += 1
            if call.status != ToolCall.Status.SUCCEEDED:
                found["tools"][call.tool_name, call.status] += 1
        if call.status in ToolCall.DONE_STATUSES:
            found["tool_calls"][call.tool_name if call.tool_name in names else "unregistered", call.status] += 1
    for status in Approval.objects.filter(run_id__in=run_ids).values_list("status", flat=True):
        found["approvals"][status] += 1
    return found


def nearest_rank(values: list, percent: float):
    return sorted(values)[nearest_rank_offset(len(values), percent)] if values else None


def random_world(rng: random.Random, agents: list[Agent]) -> World:
    """A few dozen runs: roots, forks (of forks too) and re-runs, ended or still going, some pruned."""
    world = World(rng)
    for _ in range(14):
        world.work(world.root(rng.choice(agents)), rng.randrange(1, 5))
    for run in rng.sample(world.runs, 9):
        world.end(run)
    for generation in range(3):  # forks of the runs so far, forks among them from the second on
        for parent in rng.sample(world.runs, 6):
            world.work(world.fork(parent), rng.randrange(0, 4))
        for original in [r for r in world.runs if r.status in Run.FINISHED_STATUSES][:2]:
            world.work(world.rerun(original), rng.randrange(1, 3))
        going = [r for r in world.runs if r.status not in Run.FINISHED_STATUSES]
        for run in rng.sample(going, len(going) // 2):
            world.end(run)
    for run in rng.sample([r for r in world.runs if r.status not in Run.FINISHED_STATUSES], 3):
        world.work(run, 1, leave_open=True)  # still going, waiting on calls
    forked = {r.forked_from_id for r in world.runs if r.forked_from_id}
    ended = [r for r in world.runs if r.status in Run.FINISHED_STATUSES]
    # Pruned: ended runs, parents of forks among them (the prune takes ended runs only).
    world.prune([r for r in ended if r.pk in forked][:2] + [r for r in ended if r.pk not in forked][:3])
    return world


def assert_page(world: World, agents: list[Agent], *, rollups_built: bool) -> None:
    """The metrics page, from the raw rows and from the rollups, over the window and per agent."""
    today = timezone.localdate()
    start = today - timedelta(days=DAYS - 1)
    for agent in [None, *agents]:
        ids = {r.pk for r in world.runs if agent is None or r.agent_id == agent.pk}
        truth = figures_of(world, ids)
        paths = []  # every figure figures.py declares, the same from raw rows and from the rollups
        for rolled in (False, True):
            page = metrics_summary(start=start, end=today, agent=agent, rollups=rolled)
            where = f"{'rollups' if rolled else 'raw'}, agent {agent and agent.name}"
            assert page.latency_estimated == (rolled and rollups_built), where
            assert {row.value: row.count for row in page.by_status} == +truth["status"], where
            assert {row.value: row.count for row in page.by_stop_reason} == +truth["stop"], where
            finished = truth["finished_iterations"]
            assert (page.iterations.count, page.iterations.p50, page.iterations.p95) == (
                len(finished), nearest_rank(finished, 50), nearest_rank(finished, 95)), where
            days = {d.day: (d.runs, d.tokens) for d in page.per_day if d.runs}
            assert days == {day: (n, tokens) for day, (n, tokens, _cost) in truth["day"].items()}, where
            for row in page.per_day:
                assert row.cost_usd == pytest.approx(truth["day"].get(row.day, [0, 0, 0.0])[2], abs=1e-9), where
            assert {m.model: m.steps for m in page.model_latency} == +truth["model_calls"], where
            for m in page.model_latency:
                exact = nearest_rank(truth["latencies"][m.model], 50)
                expected = rollups.bucket_value(rollups.latency_bucket(exact)) if page.latency_estimated else exact
                assert m.p50_ms == pytest.approx(expected, abs=1e-9), where
            tools = {(row.tool, kind): n for row in page.tool_errors
                     for kind, n in (("finished", row.finished), ("failed", row.failed), ("rejected", row.rejected))}
            assert +Counter(tools) == +truth["tools"], where
            approvals = page.approvals
            assert (approvals.approved, approvals.rejected) == (
                truth["approvals"][Approval.Status.APPROVED], truth["approvals"][Approval.Status.REJECTED]), where
            # The declared figures (figures.py), and one per total declared for the test (of each kind of row).
            finished_runs = sum(truth["status"][status] for status in Run.FINISHED_STATUSES)
            paths.append({name: found.value for name, found in page.figures.items()})
            assert {name: value for name, value in paths[-1].items() if name in KNOWN_FIGURES} == {
                "runs_total": len(ids), "finished_runs": finished_runs,
                "succeeded_runs": truth["status"][Run.Status.SUCCEEDED],
                "success_rate": truth["status"][Run.Status.SUCCEEDED] / finished_runs if finished_runs else None,
                "test_calls_per_run": (
                    sum(n for (_tool, kind), n in truth["tools"].items() if kind == "finished") / len(ids)
                    if ids else None),
                "total_test_model_calls": sum(truth["model_calls"].values()),
                "total_test_finished_calls": sum(n for (_tool, kind), n in truth["tools"].items() if kind == "finished"),
                "total_test_own_iterations": sum(truth["iterations"].values()),
            }, where
        assert paths[0] == paths[1], agent
        if rollups_built:  # every run's outcome (its own iterations) from the rollups and the raw rows of the rest
            built = metrics_rollups.built_days(start, today)
            figures = metrics_rollups.rolled_figures(start=start, end=today, agent=agent, built=built)
            assert +figures["outcomes"] == +truth["outcomes"], agent


KNOWN_FIGURES = {"runs_total", "finished_runs", "succeeded_runs", "success_rate", "test_calls_per_run",
                 "total_test_model_calls", "total_test_finished_calls", "total_test_own_iterations"}


def assert_prometheus(world: World, samples: dict) -> None:
    """/metrics counts every run ever (the pruned ones' share is kept), each run's own work once."""
    existing = figures_of(world, {r.pk for r in world.runs})
    truth = {key: existing[key] + world.pruned[key] for key in
             ("iterations", "ended", "tokens", "model_calls", "tool_calls", "approvals")}
    truth["cost"] = Counter(existing["cost"])
    for key, value in world.pruned["cost"].items():
        truth["cost"][key] += value

    def family(name: str, *labels: str) -> Counter:
        return +Counter({tuple(dict(key)[label] for label in labels): value
                         for (sample, key), value in samples.items() if sample == name})

    assert family("agentsite_run_iterations_total", "agent") == +Counter(
        {(agent,): n for agent, n in truth["iterations"].items()})
    assert family("agentsite_runs_ended_total", "agent", "status", "stop_reason") == +truth["ended"]
    assert family("agentsite_model_tokens_total", "agent", "model", "direction") == +truth["tokens"]
    assert family("agentsite_model_request_duration_seconds_count", "model") == +Counter(
        {(model,): n for model, n in truth["model_calls"].items()})
    assert family("agentsite_tool_calls_total", "tool", "status") == +truth["tool_calls"]
    decided = Counter()
    for (outcome, _decider), n in family("agentsite_approvals_decided_total", "outcome", "decider").items():
        decided[outcome] += n
    assert decided == +truth["approvals"]
    cost = family("agentsite_model_cost_usd_total", "agent", "model")
    assert set(cost) == {key for key, value in truth["cost"].items() if value}
    for key, value in cost.items():
        assert value == pytest.approx(truth["cost"][key], abs=1e-9), key


def assert_alerts(world: World, agents: list[Agent]) -> None:
    """Today's budget alerts sum what today's runs of each agent did themselves: with thresholds
    of zero, every agent that used anything today is alerted with exactly that use."""
    Agent.objects.filter(pk__in=[a.pk for a in agents]).update(daily_token_alert=0, daily_cost_alert_usd=0)
    BudgetAlert.objects.all().delete()
    budget_alerts_check()
    today = figures_of(world, {r.pk for r in world.runs})["agent_today"]
    alerts = {(a.agent.name, a.kind): a.observed for a in BudgetAlert.objects.select_related("agent")}
    assert {name for name, kind in alerts if kind == BudgetAlert.Kind.TOKENS} == {n for n, (t, _c) in today.items() if t}
    for (name, kind), observed in alerts.items():
        expected = today[name][0] if kind == BudgetAlert.Kind.TOKENS else today[name][1]
        assert observed == pytest.approx(expected, abs=1e-9), (name, kind)


def figure_rows() -> dict:
    return {tuple(row[:4]): row[4] for row in FigureRollup.objects.values_list(
        "day", "whole_month", "agent_id", "name", "value")}


@pytest.mark.parametrize("seed", [25, 2025])
def test_every_figure_counts_a_forks_copied_work_once_on_every_path(seed, client, token, monkeypatch, declared):  # noqa: F811
    # Each test total as a figure of its own: the page then shows every total's value.
    monkeypatch.setattr(figures, "FIGURES", figures.FIGURES + tuple(
        Figure(f"total_{total.name}", total.name, COUNT, lambda t, name=total.name: t[name]) for total in EXTRA_TOTALS))
    monkeypatch.setattr(forks_module, "run_dispatch", lambda run_id: None)  # forks wait, as if queued
    rng = random.Random(seed)
    agents = [Agent.objects.create(name=f"figures-{n}") for n in range(3)]
    rollups.rebuild(days=DAYS)  # every day of the window built (empty): each ending adds itself to its day
    world = random_world(rng, agents)
    forks = [r for r in world.runs if r.forked_from_id]
    assert any(r.forked_from_id in {f.pk for f in forks} for r in forks), "a fork of a fork"
    assert any(r.rerun_of_id for r in world.runs) and any(not r.is_finished for r in world.runs)
    assert Run.objects.filter(forked_at_step__isnull=False, forked_from__isnull=True).exists(), "a parent pruned"
    assert len(world.runs) >= 30

    # The ended runs are marked, not counted yet (the test's transaction never commits, so no
    # counter ran): the page reads them from their own rows.
    assert UncountedRun.objects.exists()
    assert_page(world, agents, rollups_built=True)
    assert_prometheus(world, scrape(client))
    assert_alerts(world, agents)
    assert counter.count_all() > 0  # as a worker's counter counts them, soon after they end
    assert not UncountedRun.objects.exists()
    assert_page(world, agents, rollups_built=True)  # the rollups as the counter kept them
    kept = snapshot(), step_snapshot(), tool_snapshot()
    kept_totals = figure_rows()
    call_command("rebuild_rollups", verbosity=0)  # and as a rebuild counts them: the same rows
    rebuilt = snapshot(), step_snapshot(), tool_snapshot()
    assert figure_rows() == kept_totals
    assert rebuilt[1:] == kept[1:] and rebuilt[0].keys() == kept[0].keys()
    for key, (runs, tokens, cost) in kept[0].items():
        assert rebuilt[0][key][:2] == (runs, tokens) and rebuilt[0][key][2] == pytest.approx(cost, abs=1e-9), key
    assert_page(world, agents, rollups_built=True)


def test_days_counted_twice_before_are_read_raw_until_rebuilt(monkeypatch):
    """Rollups built before counted a fork's copies again; migration 0024 keeps what older forks
    inherited and marks their days not built, so the page reads them exactly from the runs' rows
    until a rebuild corrects them."""
    monkeypatch.setattr(forks_module, "run_dispatch", lambda run_id: None)
    migration = importlib.import_module("runs.migrations.0024_forks_counted_once")
    world, agent = World(random.Random(7)), Agent.objects.create(name="figures-upgrade")
    parent = world.adopt(Run.objects.create(agent=agent, task="t"), 1)
    world.work(parent, 3)
    world.end(parent)
    fork = world.fork(parent)
    world.work(fork, 1)
    world.end(fork)
    days = {timezone.localtime(r.created_at).date() for r in world.runs}
    rollups.rebuild(days=DAYS)
    truth = figures_of(world, {r.pk for r in world.runs})["day"]
    start, today = timezone.localdate() - timedelta(days=DAYS - 1), timezone.localdate()

    def page_tokens() -> dict:
        return {d.day: d.tokens for d in metrics_summary(start=start, end=today, rollups=True).per_day if d.runs}

    assert page_tokens() == {day: tokens for day, (_n, tokens, _c) in truth.items()}
    # Before this release: a fork kept no record of what it inherited, and the rollups counted
    # its inherited tokens again.
    fork_day = timezone.localtime(fork.created_at).date()
    inherited = sum(s.tokens_in + s.tokens_out for s in Step.objects.filter(run=fork, index__lte=fork.forked_at_step))
    kept = Run.objects.filter(pk=fork.pk).values(*INHERITED).get()
    assert kept["inherited_iterations"] > 0 and kept["inherited_tokens_in"] + kept["inherited_tokens_out"] == inherited
    Run.objects.filter(pk=fork.pk).update(**dict.fromkeys(INHERITED, 0))
    DayRollup.objects.filter(day=fork_day, agent=agent).update(tokens=F("tokens") + inherited)
    assert page_tokens()[fork_day] == truth[fork_day][1] + inherited

    migration.keep_what_forks_inherited(django_apps, None)
    assert Run.objects.filter(pk=fork.pk).values(*INHERITED).get() == pytest.approx(kept)
    migration.recount_days_of_forks(django_apps, None)
    assert set(RollupDay.objects.filter(built=False).values_list("day", flat=True)) == {fork_day} <= days
    assert page_tokens() == {day: tokens for day, (_n, tokens, _c) in truth.items()}  # read raw meanwhile
    rollups.rebuild_day(fork_day)  # as rebuild_rollups or the periodic build_rollups task does
    assert RollupDay.objects.get(day=fork_day).built
    assert DayRollup.objects.get(day=fork_day, agent=agent).tokens == truth[fork_day][1]
    assert page_tokens() == {day: tokens for day, (_n, tokens, _c) in truth.items()}
