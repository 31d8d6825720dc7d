"""Ended runs reach the daily rollups through the counter: marked by the transaction that ends
them, counted soon after in batches, exactly once whatever runs beside it (a rebuild of the day,
a second counter), and the metrics page is exact before and after they are counted."""

import random
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs.lifecycle.housekeeping import runs_sweep
from runs.models import Agent, Run, RunRollup, UncountedRun
from runs.observability.metrics import counter, rollups
from tests.observability.metrics.test_rollups import OWNER, assert_same, end_run, seed


def counted_runs(day) -> int:
    return sum(RunRollup.objects.filter(day=day, whole_month=False).values_list("runs", flat=True))


def ended_on(day) -> int:
    return Run.objects.filter(created_at__date=day, status__in=Run.FINISHED_STATUSES).count()


@pytest.mark.django_db
def test_an_ended_run_is_marked_read_raw_by_the_page_and_counted_once_by_the_counter():
    rng = random.Random(5)
    agent = Agent.objects.create(name="counted")
    made = seed(rng, [agent], days=4, runs=40)
    rollups.rebuild(days=4)
    going = [r for r in made if not r.is_finished]
    assert going
    for r in going:
        end_run(r)  # this test's transaction never commits: no counter runs on its own
    assert UncountedRun.objects.count() == len(going)
    today = timezone.localdate()
    assert_same(today - timedelta(days=3), today)  # the marked runs read from their own rows
    assert counter.count_all() == len(going)
    assert not UncountedRun.objects.exists()
    assert counter.count_all() == 0  # counted once: nothing left to count
    assert_same(today - timedelta(days=3), today)
    for day in {timezone.localtime(r.created_at).date() for r in made}:
        assert counted_runs(day) == ended_on(day)


@pytest.mark.django_db
def test_the_counter_counts_in_batches_and_the_first_counted_run_of_a_new_day_builds_it():
    agent = Agent.objects.create(name="batches")
    runs = [Run.objects.create(agent=agent, task="t", status=Run.Status.RUNNING, lease_owner=OWNER, iterations=2)
            for _ in range(7)]
    for r in runs:
        end_run(r)
    assert rollups.count_uncounted(limit=3) == 3
    assert UncountedRun.objects.count() == 4
    assert counted_runs(timezone.localdate()) == 3
    assert counter.count_all() == 4
    assert counted_runs(timezone.localdate()) == 7
    assert rollups.RollupDay.objects.get(day=timezone.localdate()).built  # every ended run of the day is counted


@pytest.mark.django_db
def test_the_sweep_counts_runs_a_dead_process_left_marked(settings):
    settings.ROLLUP_COUNT_DELAY_SECONDS = 1.0
    agent = Agent.objects.create(name="left-over")
    r = Run.objects.create(agent=agent, task="t", status=Run.Status.RUNNING, lease_owner=OWNER, iterations=1)
    end_run(r)
    assert runs_sweep()["runs_counted"] == 0  # just ended: its process's counter is about to count it
    Run.objects.filter(pk=r.pk).update(finished_at=timezone.now() - timedelta(seconds=60))
    assert runs_sweep()["runs_counted"] == 1
    assert not UncountedRun.objects.exists() and counted_runs(timezone.localdate()) == 1


@pytest.mark.django_db(transaction=True)
def test_the_counter_thread_counts_a_run_soon_after_its_ending_commits(settings):
    """With a delay, the process's counter thread counts the runs that ended meanwhile together."""
    settings.ROLLUP_COUNT_DELAY_SECONDS = 0.3
    agent = Agent.objects.create(name="threaded")
    runs = [Run.objects.create(agent=agent, task="t", status=Run.Status.RUNNING, lease_owner=OWNER, iterations=3)
            for _ in range(3)]
    for r in runs:
        end_run(r)
    assert UncountedRun.objects.count() == 3  # not in the ending's transaction, nor right after it
    deadline = timezone.now() + timedelta(seconds=20)
    while UncountedRun.objects.exists() and timezone.now() < deadline:
        threading.Event().wait(0.05)
    assert not UncountedRun.objects.exists()
    assert counted_runs(timezone.localdate()) == 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("held", ["counter", "rebuild"])
def test_a_rebuild_and_the_counter_at_once_count_each_run_once(held, monkeypatch):
    """Two threads with their own connections: the counter's transaction held open after it took
    the marks while the day is rebuilt, or the rebuild's held open while the counter runs."""
    rng = random.Random(13)
    agent = Agent.objects.create(name="racing")
    seed(rng, [agent], days=2, runs=20)
    yesterday = timezone.localdate() - timedelta(days=1)
    rollups.rebuild(days=3)
    late = [Run.objects.create(agent=agent, task="t", status=Run.Status.RUNNING, lease_owner=OWNER, iterations=4,
                               tokens_in=10) for _ in range(3)]
    Run.objects.filter(pk__in=[r.pk for r in late]).update(created_at=timezone.now() - timedelta(days=1))
    monkeypatch.setattr(counter, "wake", lambda: None)  # counted below, by the threads
    for r in late:
        end_run(r)
    assert UncountedRun.objects.count() == 3
    inside, proceed, errors = threading.Event(), threading.Event(), []
    holder = threading.current_thread  # the thread whose transaction is held is named below

    def hold(name):
        def wrap(original):
            def held_here(*args, **kwargs):
                found = original(*args, **kwargs)
                if holder().name == name:
                    inside.set()
                    proceed.wait(30)
                return found
            return held_here
        return wrap

    if held == "counter":
        monkeypatch.setattr(rollups, "_claim_marks", hold("held")(rollups._claim_marks))
    else:
        monkeypatch.setattr(rollups, "contributions", hold("held")(rollups.contributions))

    def work(what):
        try:
            counter.count_all() if what == "counter" else rollups.rebuild_day(yesterday)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    first = threading.Thread(target=work, args=(held,), name="held")
    second = threading.Thread(target=work, args=("rebuild" if held == "counter" else "counter",), name="second")
    first.start()
    assert inside.wait(30)
    second.start()
    second.join(2)  # waiting for the held transaction's lock of the day (SQLite: its write)
    proceed.set()
    first.join(30)
    second.join(30)
    assert not errors and not first.is_alive() and not second.is_alive()
    assert not UncountedRun.objects.exists()
    assert counted_runs(yesterday) == ended_on(yesterday)
    assert_same(yesterday - timedelta(days=1), timezone.localdate())
