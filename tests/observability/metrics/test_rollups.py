"""The metrics page from the daily rollups gives the same figures as from the runs' own rows:
over randomised runs of several agents, models, tools and statuses across the window's edges,
with runs ending (through the real ending transaction) after a rebuild and while one runs."""

import random
import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from runs.engine.loop import run_end
from runs.engine.storage.records import Recorder, run_close
from runs.lifecycle.archive import runs_delete
from runs.models import Agent, Approval, RollupDay, Run, RunRollup, Step, StepRollup, ToolCall, ToolRollup
from runs.models.rollups import AllAgentsStepRollup, ApprovalRollup, ApprovalWait, WaitRollup
from runs.observability.metrics import counter, rollups
from runs.observability.metrics.aggregates import SecondsBetween
from runs.observability.metrics.page import metrics_summary
from runs.observability.metrics.rollup_reads import built_days
from tests.observability.metrics.test_metrics import END, START, dataset  # noqa: F401 (a fixture)

OWNER = "rollup-test"
MODELS = ["gpt-a", "gpt-b", "small"]
TOOLS = ["search", "write_file", "send_mail", "delete_row"]
STILL_GOING = [Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.AWAITING_APPROVAL]
ENDINGS = [
    (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER),
    (Run.Status.FAILED, Run.StopReason.ITERATION_LIMIT),
    (Run.Status.FAILED, Run.StopReason.MODEL_ERROR),
    (Run.Status.CANCELLED, Run.StopReason.CANCELLED),
]


def seed(rng: random.Random, agents: list[Agent], *, days: int, runs: int) -> list[Run]:
    """`runs` runs over the last `days` days (today included, and the window's first instant)."""
    today = timezone.localdate()
    made = []
    for n in range(runs):
        day = today - timedelta(days=rng.randrange(days))
        created = timezone.make_aware(timezone.datetime.combine(day, timezone.datetime.min.time()))
        created += timedelta(seconds=0 if n % 17 == 0 else rng.randrange(86400))
        going = rng.random() < 0.2
        status, stop = (rng.choice(STILL_GOING), "") if going else rng.choice(ENDINGS)
        r = Run.objects.create(
            agent=rng.choice(agents),
            task="t",
            status=status,
            stop_reason=stop,
            iterations=rng.randrange(1, 12),
            tokens_in=rng.randrange(5000),
            tokens_out=rng.randrange(2000),
            cost_usd=rng.random() / 10,
            lease_owner=OWNER,
        )
        Run.objects.filter(pk=r.pk).update(created_at=min(created, timezone.now()))
        for index in range(1, rng.randrange(1, 5)):
            latency = rng.choice([0.0, rng.uniform(1, 5000), float(rng.randrange(50, 900))])
            step = Step.objects.create(
                run=r,
                index=index,
                iteration=index,
                model=rng.choice(MODELS),
                latency_ms=latency,
                message={"role": "assistant"},
            )
            for c in range(rng.randrange(3)):
                tool_status = rng.choice(list(ToolCall.Status.values))
                call = ToolCall.objects.create(
                    run=r,
                    step=step,
                    index=c,
                    call_id=f"c{c}",
                    tool_name=rng.choice(TOOLS),
                    arguments="{}",
                    args_hash="h",
                    idempotency_key=f"{r.pk}-{index}-{c}",
                    status=tool_status,
                )
                if rng.random() < 0.3:
                    a = Approval.objects.create(
                        tool_call=call,
                        run=r,
                        status=rng.choice(list(Approval.Status.values)),
                        automatic=rng.random() < 0.3,
                        rule_name=rng.choice(["", "r1", "r2"]),
                        rule_version=rng.choice([None, 1, 2]),
                    )
                    Approval.objects.filter(pk=a.pk).update(
                        decided_at=a.requested_at + timedelta(seconds=rng.randrange(600))
                    )
        made.append(r)
    return made


def assert_same(start, end, agent=None):
    """Every figure from the rollups equals the raw one (latency percentiles: the raw value's bucket)."""
    rolled = metrics_summary(start=start, end=end, agent=agent, rollups=True)
    raw = metrics_summary(start=start, end=end, agent=agent, rollups=False)
    # Read from the rollups whenever the window holds a built day (today included).
    assert rolled.latency_estimated == bool(built_days(start, end)) and not raw.latency_estimated
    for name in (
        "runs_total",
        "by_status",
        "by_stop_reason",
        "finished_runs",
        "succeeded_runs",
        "iterations",
        "tool_errors",
        "approvals",
        "supervision",
    ):
        assert getattr(rolled, name) == getattr(raw, name), name
    assert [(d.day, d.runs, d.tokens) for d in rolled.per_day] == [(d.day, d.runs, d.tokens) for d in raw.per_day]
    assert [d.cost_usd for d in rolled.per_day] == pytest.approx([d.cost_usd for d in raw.per_day], rel=1e-9, abs=1e-12)
    assert [(m.model, m.steps) for m in rolled.model_latency] == [(m.model, m.steps) for m in raw.model_latency]
    if not rolled.latency_estimated:
        assert rolled.model_latency == raw.model_latency
    for got, exact in zip(rolled.model_latency, raw.model_latency) if rolled.latency_estimated else ():
        for estimate, value in ((got.p50_ms, exact.p50_ms), (got.p95_ms, exact.p95_ms)):
            assert estimate == rollups.bucket_value(rollups.latency_bucket(value))
            assert estimate == pytest.approx(value, rel=rollups.RELATIVE_ACCURACY, abs=1e-9)
    return rolled


def end_run(r: Run, reason=Run.StopReason.FINAL_ANSWER) -> Run:
    return run_end(run_id=r.pk, owner=OWNER, reason=reason)


def windows(today):
    return [
        (today - timedelta(days=29), today),
        (today - timedelta(days=39), today - timedelta(days=10)),
        (today - timedelta(days=3), today - timedelta(days=3)),
        (today, today),
        (today - timedelta(days=80), today),
        (today - timedelta(days=70), today - timedelta(days=5)),
    ]


@pytest.mark.django_db
def test_rollups_give_the_raw_figures_over_random_runs():
    rng = random.Random(16)
    agents = [Agent.objects.create(name=f"agent-{n}") for n in range(3)]
    made = seed(rng, agents, days=75, runs=500)  # at least one whole month, read from its month rows
    call_command("rebuild_rollups")
    today = timezone.localdate()
    # Runs end after the rebuild, through the ending transaction: some created today, most before.
    going = [r for r in made if r.status in STILL_GOING]
    for r in going[: len(going) // 2]:
        end_run(r, rng.choice([Run.StopReason.FINAL_ANSWER, Run.StopReason.CANCELLED]))
    # And some are deleted (retention), which takes them out of the rollups.
    runs_delete(run_ids=[r.pk for r in made[:15]])
    percentiles_compared = False
    for start, end in windows(today):
        assert max(built_days(start, end)) == end  # every window's days are read from the rollups, today's too
        rolled = assert_same(start, end)
        percentiles_compared |= rolled.latency_estimated and bool(rolled.model_latency)
        for agent in agents:
            assert_same(start, end, agent)
    assert (
        rolled.runs_total
        == Run.objects.filter(
            created_at__date__gte=today - timedelta(days=70), created_at__date__lte=today - timedelta(days=5)
        ).count()
    )
    assert StepRollup.objects.filter(whole_month=True, day__gte=today - timedelta(days=70)).exists()
    assert percentiles_compared  # some window read its percentiles from the buckets, so they were checked
    assert_all_agents_are_sums()  # after a rebuild, endings counted one by one, and runs deleted


@pytest.mark.django_db
def test_the_command_rebuilds_from_scratch_to_the_same_rollups():
    rng = random.Random(7)
    agents = [Agent.objects.create(name=f"agent-{n}") for n in range(2)]
    made = seed(rng, agents, days=20, runs=150)
    call_command("rebuild_rollups", days=30)
    for r in [r for r in made if r.status in STILL_GOING]:
        end_run(r)  # marked by the ending transactions...
    assert counter.count_all() > 0  # ...and counted soon after, as a worker's counter does
    kept, kept_steps, kept_tools = snapshot(), step_snapshot(), tool_snapshot()
    for model in (RunRollup, StepRollup, AllAgentsStepRollup, ToolRollup, RollupDay):
        model.objects.all().delete()
    call_command("rebuild_rollups", days=30)
    rebuilt = snapshot()
    assert step_snapshot() == kept_steps and kept_steps  # day rows and month rows alike
    assert_all_agents_are_sums()
    assert tool_snapshot() == kept_tools and kept_tools
    assert rebuilt.keys() == kept.keys() and kept  # the loop below compares something
    for key in kept:
        assert rebuilt[key][:2] == kept[key][:2], key
        assert rebuilt[key][2] == pytest.approx(kept[key][2], rel=1e-9, abs=1e-12)


def assert_all_agents_are_sums() -> None:
    """The page for every agent reads AllAgentsStepRollup: it must hold StepRollup's sums exactly."""
    sums = Counter()
    for day, whole_month, model, bucket, n in StepRollup.objects.values_list("day", "whole_month", "model", "bucket", "steps"):
        sums[day, whole_month, model, bucket] += n
    stored = {tuple(row[:4]): row[4] for row in AllAgentsStepRollup.objects.values_list("day", "whole_month", "model", "bucket", "steps")}
    assert stored == +sums and stored


@pytest.mark.django_db
def test_an_agent_deleted_after_its_runs_leaves_the_sums_over_agents():
    # Runs are pruned after RUN_RETENTION_DAYS; their rollups stay, and their agent may then be
    # deleted. Its latency buckets go with it, from the per-agent rows and from the sums alike,
    # so the page for every agent equals the sum of the agents' pages.
    rng = random.Random(5)
    agents = [Agent.objects.create(name=f"agent-{n}") for n in range(3)]
    made = seed(rng, agents, days=40, runs=200)
    call_command("rebuild_rollups")
    doomed = agents[0]
    assert StepRollup.objects.filter(agent=doomed).exists()
    Run.objects.filter(agent=doomed).delete()  # the runs go; their rollups stay
    doomed.delete()
    assert not StepRollup.objects.filter(agent=doomed.pk).exists()
    assert_all_agents_are_sums()
    today = timezone.localdate()
    every = metrics_summary(start=today - timedelta(days=39), end=today)
    steps = sum(row.steps for row in every.model_latency)
    assert steps == sum(
        row.steps for agent in agents[1:] for row in metrics_summary(start=today - timedelta(days=39), end=today, agent=agent).model_latency
    )
    assert steps == Step.objects.filter(run__in=[r for r in made if r.agent_id != doomed.pk]).count()


def step_snapshot() -> set:
    return set(StepRollup.objects.values_list("day", "whole_month", "agent_id", "model", "bucket", "steps"))


def tool_snapshot() -> set:
    return set(ToolRollup.objects.values_list("day", "agent_id", "tool_name", "finished", "failed", "rejected"))


def snapshot() -> dict:
    return {
        tuple(row[:6]): row[6:]
        for row in RunRollup.objects.values_list(
            "day", "whole_month", "agent_id", "status", "stop_reason", "iterations", "runs", "tokens", "cost_usd"
        )
    }


@pytest.mark.django_db
def test_the_hand_made_dataset_reads_the_same_from_rollups(dataset):  # noqa: F811
    call_command("rebuild_rollups")
    assert RollupDay.objects.filter(day=START, built=True).exists()
    assert_same(START, END)
    assert_same(START + timedelta(days=1), END + timedelta(days=3))


@pytest.mark.django_db
def test_the_page_shows_the_same_numbers_and_says_latency_is_estimated_from_rollups(client, dataset, settings):  # noqa: F811
    from django.urls import reverse

    from tests.lifecycle.test_history import user_in

    client.force_login(user_in("viewers", "vera"))
    period = {"date_from": START.isoformat(), "date_to": END.isoformat()}
    raw = client.get(reverse("metrics"), period)
    assert b'id="latency-estimated"' not in raw.content  # no built day yet: read raw, exact
    call_command("rebuild_rollups")
    rolled = client.get(reverse("metrics"), period)
    assert b'id="latency-estimated"' in rolled.content and b"within 1%" in rolled.content
    assert rolled.context["m"].by_status == raw.context["m"].by_status
    settings.METRICS_ROLLUPS = False
    assert b'id="latency-estimated"' not in client.get(reverse("metrics"), period).content


@pytest.mark.django_db
def test_days_from_before_the_rollups_are_read_from_the_runs_rows():
    rng = random.Random(3)
    agents = [Agent.objects.create(name="old")]
    seed(rng, agents, days=10, runs=60)
    yesterday = timezone.localdate() - timedelta(days=1)
    old = Run.objects.create(agent=agents[0], task="t", status=Run.Status.SUCCEEDED, iterations=2, tokens_in=7)
    new = Run.objects.create(agent=agents[0], task="t", status=Run.Status.RUNNING, lease_owner=OWNER)
    Run.objects.filter(pk__in=[old.pk, new.pk]).update(created_at=timezone.now() - timedelta(days=1))
    end_run(new)
    counter.count_all()  # the first run counted for yesterday: its other ended runs are not counted
    assert not RollupDay.objects.get(day=yesterday).built
    call_command("rebuild_rollups", days=5)  # builds yesterday; the days before stay raw
    assert RollupDay.objects.get(day=yesterday).built
    summary = assert_same(yesterday - timedelta(days=9), timezone.localdate())
    assert summary.runs_total == Run.objects.count()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("hold", ["ending_locked_first", "rebuild_reads_first"])
def test_a_run_ending_during_a_rebuild_is_counted_once(hold):
    """Two threads with their own connections: a run's ending transaction held open at the point
    `hold` names while the rebuild of the run's day runs; the run is counted exactly once."""
    rng = random.Random(11)
    agent = Agent.objects.create(name="racer")
    seed(rng, [agent], days=3, runs=30)
    yesterday = timezone.localdate() - timedelta(days=1)
    r = Run.objects.create(
        agent=agent,
        task="t",
        status=Run.Status.RUNNING,
        lease_owner=OWNER,
        iterations=3,
        tokens_in=100,
        tokens_out=50,
        cost_usd=0.5,
    )
    Run.objects.filter(pk=r.pk).update(created_at=timezone.now() - timedelta(days=1))
    call_command("rebuild_rollups", days=3)
    started, proceed, errors = threading.Event(), threading.Event(), []

    def ending():
        try:
            run = Run.objects.get(pk=r.pk)
            recorder = Recorder(run, OWNER)
            with recorder.transaction():
                if hold == "ending_locked_first":
                    run_close(recorder, Run.StopReason.FINAL_ANSWER, elapsed=1.0)  # ended and marked, not committed
                started.set()
                proceed.wait(30)
                if hold == "rebuild_reads_first":
                    run_close(recorder, Run.StopReason.FINAL_ANSWER, elapsed=1.0)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    def rebuilding():
        try:
            rollups.rebuild_day(yesterday)
        except Exception as exc:  # pragma: no cover
            errors.append(exc)
        finally:
            connection.close()

    ender = threading.Thread(target=ending)
    ender.start()
    assert started.wait(30)
    rebuilder = threading.Thread(target=rebuilding)
    rebuilder.start()
    rebuilder.join(2)  # done, or waiting for the ending's write (SQLite: one writer at a time)
    proceed.set()
    ender.join(30)
    rebuilder.join(30)
    assert not errors
    ended = Run.objects.filter(created_at__date=yesterday, status__in=Run.FINISHED_STATUSES)
    assert (
        sum(RunRollup.objects.filter(day=yesterday, whole_month=False).values_list("runs", flat=True)) == ended.count()
    )
    assert_same(yesterday - timedelta(days=2), timezone.localdate())
    assert_all_agents_are_sums()


def test_a_summary_after_the_end_is_added_to_the_rollups_of_its_day(launch, script):
    """The real loop over the demo model: a run stops at its iteration limit, then its summary call
    adds a step, tokens and cost to the ended run; the day's rollups hold them, as a rebuild does."""
    from tests.engine.loop_contract.support import call, calls

    rollups.rebuild_day(timezone.localdate())  # the day is built: the ending and the summary keep it
    model = script(calls(call("get_weather", {"city": "Lagos"}, "c1")), {"content": "It was sunny in Lagos."})
    run = launch("weather", models=[model], max_iterations=1, summarize_on_stop=True)
    assert (run.stop_reason, run.answer) == (Run.StopReason.ITERATION_LIMIT, "It was sunny in Lagos.")
    assert list(Step.objects.filter(run=run).values_list("kind", flat=True).order_by("index")) == ["turn", "summary"]
    row = RunRollup.objects.get(day=timezone.localdate(), whole_month=False, agent=run.agent)
    assert (row.runs, row.tokens) == (1, run.tokens_in + run.tokens_out) and row.tokens > 0
    kept, kept_steps = snapshot(), step_snapshot()
    assert sum(n for _day, whole_month, _agent, _model, _bucket, n in kept_steps if not whole_month) == 2
    rollups.rebuild_day(timezone.localdate())
    assert snapshot().keys() == kept.keys() and step_snapshot() == kept_steps


def decided_by_people(rng: random.Random, runs: list[Run], *, share: float = 0.5) -> None:
    """Approvals decided by people after waits of any length (to the microsecond, and some equal),
    under several rules and tools: the waits' percentiles then fall anywhere in their buckets."""
    equal = timedelta(seconds=42.5)
    for r in runs:
        if rng.random() > share:
            continue
        index = 50 + Step.objects.filter(run=r).count()
        step = Step.objects.create(run=r, index=index, iteration=index, model="gpt-a", latency_ms=5.0, message={})
        for c in range(rng.randrange(1, 4)):
            call = ToolCall.objects.create(
                run=r,
                step=step,
                index=c,
                call_id=f"p{c}",
                tool_name=rng.choice(TOOLS),
                arguments="{}",
                args_hash="h",
                idempotency_key=f"p-{r.pk}-{index}-{c}",
            )
            a = Approval.objects.create(
                tool_call=call,
                run=r,
                status=rng.choice([Approval.Status.APPROVED, Approval.Status.REJECTED]),
                rule_name=rng.choice(["", "r1", "r2", "r3"]),
                rule_version=rng.choice([None, 1]),
            )
            wait = equal if rng.random() < 0.2 else timedelta(microseconds=rng.randrange(1, 3_600_000_000))
            Approval.objects.filter(pk=a.pk).update(decided_at=a.requested_at + wait)


@pytest.mark.django_db
def test_approval_figures_and_exact_wait_percentiles_from_the_rollups_over_random_decisions():
    """People's waits to the microsecond (percentiles anywhere inside a bucket, ties across buckets'
    edges), several rules and tools, runs ending after the rebuild and deleted: every approval
    and supervision figure, percentiles included, equals the raw one exactly."""
    rng = random.Random(2016)
    agents = [Agent.objects.create(name=f"agent-{n}") for n in range(2)]
    made = seed(rng, agents, days=70, runs=300)
    decided_by_people(rng, made)
    call_command("rebuild_rollups")
    going = [r for r in made if r.status in STILL_GOING]
    decided_by_people(rng, going[: len(going) // 2], share=1.0)  # decided while going, counted as they end
    for r in going[: len(going) // 2]:
        end_run(r)
    runs_delete(run_ids=[r.pk for r in made[-10:]])
    today = timezone.localdate()
    compared = 0
    for start, end in windows(today):
        for agent in (None, *agents):
            rolled = assert_same(start, end, agent)
            compared += bool(rolled.latency_estimated and rolled.supervision.wait_by_rule)
    assert compared  # some window read its approvals from the rollups, with waits to rank
    assert ApprovalWait.objects.exists() and WaitRollup.objects.filter(whole_month=True).exists()


def test_a_month_row_less_its_other_days_stands_for_the_days_in_the_window():
    """month_plan reads a month mostly in the window as its month row less the days outside (or not
    built), one barely in it as its days: each built day of the window counted once, no other."""
    from datetime import date

    from runs.observability.metrics.rollup_reads import month_plan

    start, end = date(2025, 9, 2), date(2025, 11, 20)
    built = {start + timedelta(days=n) for n in range((end - start).days + 1)} - {date(2025, 10, 7)}
    months, plus, minus = month_plan(start, end, built)
    assert months == [date(2025, 9, 1), date(2025, 10, 1), date(2025, 11, 1)]
    counted = Counter()
    for month in months:
        after = (month.replace(day=28) + timedelta(days=4)).replace(day=1)
        counted.update(month + timedelta(days=n) for n in range((after - month).days))
    counted.update(plus)
    counted.subtract(minus)
    assert {day: n for day, n in counted.items() if n} == Counter(built)  # a day taken away twice shows as -1
    assert month_plan(date(2025, 9, 28), date(2025, 10, 2), built) == (
        [],
        sorted(day for day in built if date(2025, 9, 28) <= day <= date(2025, 10, 2)),
        [],
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("hold", ["decision_held_open", "rebuild_held_open"])
def test_approvals_decided_during_a_rebuild_are_counted_once(hold):
    """A person's decision (the real approval_decide) on a run of yesterday, its transaction held
    open while the day is rebuilt, or the rebuild's held open while the person decides; then the
    run ends, expiring its other approval. Every approval of the day is counted once, the
    decision's wait exactly."""
    from django.contrib.auth.models import Permission, User

    from runs.engine.storage.db import write_transaction
    from runs.supervision.approvals.decide import approval_decide

    rng = random.Random(12)
    agent = Agent.objects.create(name="racer")
    seed(rng, [agent], days=3, runs=30)
    person = User.objects.create_user("decider")
    person.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    yesterday = timezone.localdate() - timedelta(days=1)
    r = Run.objects.create(agent=agent, task="t", status=Run.Status.AWAITING_APPROVAL, lease_owner=OWNER, iterations=2)
    Run.objects.filter(pk=r.pk).update(created_at=timezone.now() - timedelta(days=1))
    step = Step.objects.create(run=r, index=1, iteration=1, model="gpt-a", latency_ms=80.0, message={})
    asked = []
    for c, tool in enumerate(["delete_row", "send_mail"]):
        call = ToolCall.objects.create(
            run=r,
            step=step,
            index=c,
            call_id=f"a{c}",
            tool_name=tool,
            arguments="{}",
            args_hash="h",
            idempotency_key=f"race-{c}",
            status=ToolCall.Status.AWAITING_APPROVAL,
        )
        asked.append(Approval.objects.create(tool_call=call, run=r, rule_name="r1", rule_version=3))
    Approval.objects.filter(pk=asked[0].pk).update(requested_at=timezone.now() - timedelta(seconds=93.25))
    call_command("rebuild_rollups", days=3)
    started, proceed, errors = threading.Event(), threading.Event(), []

    def deciding():
        try:
            with write_transaction():
                approval_decide(approval_id=asked[0].pk, user=person, approve=True, reason="ok")
                if hold == "decision_held_open":
                    started.set()
                    proceed.wait(30)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    def rebuilding():
        try:
            with write_transaction():
                rollups.rebuild_day(yesterday)
                if hold == "rebuild_held_open":
                    started.set()
                    proceed.wait(30)
        except Exception as exc:  # pragma: no cover
            errors.append(exc)
        finally:
            connection.close()

    first, second = (deciding, rebuilding) if hold == "decision_held_open" else (rebuilding, deciding)
    holder = threading.Thread(target=first)
    holder.start()
    assert started.wait(30)
    other = threading.Thread(target=second)
    other.start()
    other.join(2)  # done, or waiting for the holder
    proceed.set()
    holder.join(30)
    other.join(30)
    assert not errors
    assert Approval.objects.get(pk=asked[0].pk).status == Approval.Status.APPROVED
    end_run(r)  # closes the other approval, and counts both with the run
    assert Approval.objects.get(pk=asked[1].pk).status == Approval.Status.CLOSED
    ended = Approval.objects.filter(run__created_at__date=yesterday, run__status__in=Run.FINISHED_STATUSES)
    assert sum(ApprovalRollup.objects.filter(day=yesterday).values_list("approvals", flat=True)) == ended.count()
    exact = Approval.objects.annotate(w=SecondsBetween("decided_at", "requested_at")).get(pk=asked[0].pk).w
    assert list(ApprovalWait.objects.filter(approval_id=asked[0].pk).values_list("wait", flat=True)) == [exact]
    assert exact >= 93.25
    rolled = assert_same(yesterday - timedelta(days=2), timezone.localdate())
    assert rolled.latency_estimated and rolled.supervision.person_decisions >= 1
    assert any(
        row.rule_name == "r1" and row.rule_version == 3 and row.asked == 2 for row in rolled.supervision.rule_hits
    )


@pytest.mark.django_db
def test_days_left_unbuilt_by_an_upgrade_are_built_by_the_periodic_task_a_few_at_a_time(settings):
    from runs.tasks import build_rollups

    rng = random.Random(11)
    agents = [Agent.objects.create(name=f"agent-{n}") for n in range(2)]
    seed(rng, agents, days=12, runs=120)
    call_command("rebuild_rollups")
    RollupDay.objects.update(built=False)  # as migration 0016 leaves them
    today = timezone.localdate()
    past = RollupDay.objects.filter(day__lt=today)
    assert past.count() > 7  # more than one tick's worth
    assert "runs.tasks.build_rollups" in {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    build_rollups()
    assert past.filter(built=True).count() == 7  # the newest seven, the days most pages read
    built = past.filter(built=True).values_list("day", flat=True)
    assert min(built) > max(past.filter(built=False).values_list("day", flat=True))
    while past.filter(built=False).exists():
        build_rollups()
    assert not RollupDay.objects.filter(day=today, built=True).exists()  # today: read raw until it is over
    assert_same(today - timedelta(days=11), today)
    for agent in agents:
        assert_same(today - timedelta(days=11), today - timedelta(days=1), agent)
