"""The Supervision page's figures and /metrics' decision families at 100,000 decisions (issue 47:
decision quality, measured).

Seeds a fresh database with bulk_create: in the demo agent's project, --approvals calls asked in
the last 30 days (runs of 10 calls, a step each, the approval and its evidence row), decided as a
busy team of eight decides them (most approved, some quickly, some rejected; rules, grants and
expiry take some; a few calls fail, a few answer "already_cancelled", some are done again later
with other arguments), with rules in shadow beside a tenth of them and nudges shown; plus a fifth
as many older calls and another project's, which the figures must pass over.

Then times, median of --repeat, each read of the page (the project's report: figures, people and days;
longest waits, the contradicted calls, one person's figures), the whole page
through Django's test Client, and /metrics' decision families.

Run: .venv/bin/python bench/supervision_figures.py [--approvals 100000] [--repeat 5]   (a temporary SQLite file)
     DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_supervision .venv/bin/python bench/supervision_figures.py
The PostgreSQL database is DROPPED and created again: its name must contain "bench" (never "test").
"""
import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLS_PER_RUN = 10
BATCH = 5000
PEOPLE = ("amy", "rita", "sam", "lee", "kim", "joe", "ana", "max")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--approvals", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="time the seeded database again (DATABASE_URL, or --sqlite)")
    parser.add_argument("--sqlite", help="with --reuse: the SQLite file")
    return parser.parse_args()


def seed(total: int) -> None:
    from django.contrib.auth.models import Group, User
    from django.utils import timezone

    from projects.models import Membership, Project
    from runs.models import Agent, Approval, CallEvidence, NudgeShown, Run, ShadowDecision, Step, ToolCall

    rng = random.Random(47)
    demo = Agent.objects.get(name="demo")
    Project.objects.filter(pk=demo.project_id).update(nudge_after_quick_approvals=5)
    operators = Group.objects.get(name="operators")
    people = {name: User.objects.create_user(name) for name in PEOPLE}
    Membership.objects.bulk_create([Membership(project_id=demo.project_id, user=u, role=operators) for u in people.values()])
    other_project = Project.objects.get_or_create(slug="other-team", defaults={"name": "Other team"})[0]
    other = Agent.objects.get(pk=demo.pk)
    other.pk, other.name, other.project = None, "other-bot", other_project
    other.save()
    now = timezone.now()
    stamped = [Approval._meta.get_field("requested_at"), CallEvidence._meta.get_field("created_at")]
    for field in stamped:
        field.auto_now_add = False  # the seeded times stand (the bench only)
    try:
        for agent, count, oldest, newest in ((demo, total, 0, 29.9), (demo, total // 5, 31, 120), (other, total // 5, 0, 29.9)):
            for start in range(0, count, BATCH):
                _batch(agent, min(BATCH, count - start), oldest, newest, now, rng, people,
                       (Run, Step, ToolCall, Approval, CallEvidence, ShadowDecision, NudgeShown))
    finally:
        for field in stamped:
            field.auto_now_add = True


def _batch(agent, count, oldest, newest, now, rng, people, models) -> None:
    Run, Step, ToolCall, Approval, CallEvidence, ShadowDecision, NudgeShown = models
    runs = Run.objects.bulk_create([Run(agent=agent, task="cancel what the customer asked", status="succeeded")
                                    for _ in range(count // CALLS_PER_RUN + 1)])
    steps = Step.objects.bulk_create([Step(run=run, index=1, iteration=1, model="m", message={}) for run in runs])
    calls = []
    for n in range(count):
        roll = rng.random()
        status = "failed" if roll < 0.02 else "succeeded"
        text = '{"ok": true, "result": {"already_cancelled": true}}' if 0.02 <= roll < 0.04 else '{"ok": true}'
        calls.append(ToolCall(run=runs[n // CALLS_PER_RUN], step=steps[n // CALLS_PER_RUN], index=n % CALLS_PER_RUN,
                              call_id=f"c{n}", tool_name="cancel_order", arguments="{}", result_text=text,
                              args_hash=f"{rng.getrandbits(64):016x}", idempotency_key=f"k{n}", status=status))
    ToolCall.objects.bulk_create(calls)
    approvals, evidences, shadows, nudges = [], [], [], []
    for call in calls:
        when = now - timedelta(days=rng.uniform(oldest, newest))
        shown = rng.uniform(0, 120) if rng.random() < 0.7 else None
        took = rng.lognormvariate(2.5, 1.5)
        roll, person = rng.random(), rng.choice(PEOPLE)
        status, automatic, user = "approved", False, people[person]
        if roll < 0.15:
            status = "rejected"
        elif roll < 0.30:
            automatic, person, user = True, "", None
        elif roll < 0.33:
            status, person, user = "expired", "", None
        appeared = when + timedelta(seconds=shown or 0)
        approvals.append(Approval(tool_call=call, run_id=call.run_id, status=status, automatic=automatic,
                                  decided_by=user, decided_by_name=person, requested_at=when,
                                  decided_at=appeared + timedelta(seconds=took), rule_name="desk" if automatic else ""))
    Approval.objects.bulk_create(approvals)
    for n, approval in enumerate(approvals):
        appeared = approval.requested_at + timedelta(seconds=rng.uniform(0, 120))
        # One call in twenty is on a thing an earlier call of the batch was on.
        identity = f"order-{id(approvals)}-{rng.randrange(n) if n and rng.random() < 0.05 else n}"
        evidences.append(CallEvidence(approval=approval, project_id=agent.project_id, tool_name="cancel_order",
                                      identity=identity, shown_at=appeared, created_at=approval.requested_at,
                                      state={"moot": True} if rng.random() < 0.01 else {}))
        if rng.random() < 0.1:
            shadows.append(ShadowDecision(approval=approval, rule_key=1, rule_version=1, rule_name="shadow",
                                          outcome=rng.choice(("approve", "reject", "ask"))))
        if approval.decided_by_id and rng.random() < 0.01:
            nudges.append(NudgeShown(approval=approval, user_id=approval.decided_by_id, user_name=approval.decided_by_name,
                                     project_id=agent.project_id, streak=5))
    CallEvidence.objects.bulk_create(evidences)
    ShadowDecision.objects.bulk_create(shadows)
    NudgeShown.objects.bulk_create(nudges)


def timed(repeat: int, function) -> str:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return f"median {1000 * statistics.median(times):7.1f} ms, max {1000 * max(times):7.1f} ms"


def main():
    args = parse_args()
    sys.path.insert(0, HERE)
    from bench._common import setup_django
    from bench.dashboard import fresh_database

    if args.reuse:
        setup_django(args.sqlite)
    else:
        sqlite_path, where = fresh_database()
        setup_django(sqlite_path)
        from django.core.management import call_command
        from django.db import connection

        started = time.perf_counter()
        call_command("migrate", verbosity=0)
        seed(args.approvals)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        print(f"{where}: migrated and seeded {args.approvals:,} approvals in the window in "
              f"{time.perf_counter() - started:.1f} s")
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]

    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    from runs.models import Agent
    from runs.observability.prometheus.decision_counters import decision_quality_figures
    from runs.supervision.quality import report as q

    project_id = Agent.objects.get(name="demo").project_id
    amy = User.objects.get(username="amy")
    scope, mine = q.scope_of(project_id=project_id), q.scope_of(project_id=project_id, person_id=amy.pk)
    figures = q.quality_report(scope).figures
    print(f"the project's figures: {figures.decisions:,} decisions, p50 {figures.decide_p50} s, p90 {figures.decide_p90} s, "
          f"{figures.quick:,} quick, {figures.contradicted:,} contradicted, {figures.nudges} nudges")
    client = Client()
    client.force_login(amy)
    for name, read in (
        ("report (project, people)", lambda: q.quality_report(scope)),
        ("report (one person)", lambda: q.quality_report(mine, people=False)),
        ("longest waits", lambda: q.longest_waits(scope)),
        ("contradicted calls", lambda: q.contradicted_calls(scope)),
        ("the page (Client)", lambda: client.get(reverse("supervision"))),
        ("/metrics decision families", lambda: decision_quality_figures({})),
    ):
        print(f"{name:28} {timed(args.repeat, read)}")


if __name__ == "__main__":
    main()
