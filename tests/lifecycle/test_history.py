"""The run history page: filters, pagination, bad filter values, query count."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.lifecycle import run_list as history
from runs.models import Agent, Run, Step, ToolCall

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def user_in(group: str | None, name: str) -> User:
    user = User.objects.create_user(name)  # no password: force_login needs none, hashing is slow
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def viewer_client(client):
    client.force_login(user_in("viewers", "vera"))
    return client


@pytest.fixture
def agents():
    return Agent.objects.create(name="alpha"), Agent.objects.create(name="beta")


def make_run(
    agent,
    task="look something up",
    *,
    status=Run.Status.SUCCEEDED,
    stop_reason=Run.StopReason.FINAL_ANSWER,
    created=DAY,
    models=(),
    tools=(),
    iterations=1,
    tokens=(10, 5),
    cost=0.01,
) -> Run:
    run = Run.objects.create(
        agent=agent,
        task=task,
        status=status,
        stop_reason=stop_reason,
        iterations=iterations,
        tokens_in=tokens[0],
        tokens_out=tokens[1],
        cost_usd=cost,
    )
    Run.objects.filter(pk=run.pk).update(created_at=created)  # created_at is auto_now_add
    steps = [
        Step.objects.create(run=run, index=i, iteration=i, model=model, message={"role": "assistant"})
        for i, model in enumerate(models or (["m-default"] if tools else []), 1)
    ]
    for i, tool in enumerate(tools):
        ToolCall.objects.create(
            run=run,
            step=steps[0],
            index=i,
            call_id=f"c{i}",
            tool_name=tool,
            arguments="{}",
            args_hash=f"h{i}",
            idempotency_key=f"k{run.pk}-{i}",
            status=ToolCall.Status.SUCCEEDED,
        )
    return run


def listed(response) -> list[int]:
    assert response.status_code == 200
    return [int(pk) for pk in re.findall(r'class="run-row" data-run-id="(\d+)"', response.content.decode())]


def get(client, **params):
    return client.get(reverse("run_list"), params)


def test_home_redirects_to_history(viewer_client):
    response = viewer_client.get(reverse("home"))
    assert response.status_code == 302 and response.url == reverse("run_list")


def test_anonymous_goes_to_login_and_a_user_without_permission_gets_403(client):
    response = client.get(reverse("run_list"))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))
    client.force_login(user_in(None, "nobody"))
    assert client.get(reverse("run_list")).status_code == 403


def test_newest_first_with_the_columns(viewer_client, agents):
    alpha, _ = agents
    old = make_run(alpha, created=DAY - timedelta(days=2))
    new = make_run(
        alpha,
        "x" * 300,
        created=DAY,
        status=Run.Status.FAILED,
        stop_reason=Run.StopReason.ITERATION_LIMIT,
        iterations=7,
        tokens=(1200, 34),
        cost=0.1234,
    )
    response = get(viewer_client)
    assert listed(response) == [new.pk, old.pk]
    html = response.content.decode()
    for selector in ('id="history-filters"', 'id="history-table"'):
        assert selector in html
    row = html[html.index(f'data-run-id="{new.pk}"') :]
    row = row[: row.index("</tr>")]
    assert reverse("run_detail", args=[new.pk]) in row
    assert "2026-03-10 12:00" in row and "alpha" in row
    assert "x" * 119 + "…" in row and "x" * 121 not in row
    assert "status status-failed" in row and "Iteration limit" in row
    assert ">7<" in row and ">1,234<" in row and "$0.1234" in row


def test_status_and_stop_reason_filters(viewer_client, agents):
    alpha, _ = agents
    ok = make_run(alpha)
    failed = make_run(alpha, status=Run.Status.FAILED, stop_reason=Run.StopReason.MODEL_ERROR)
    cancelled = make_run(alpha, status=Run.Status.CANCELLED, stop_reason=Run.StopReason.CANCELLED)
    assert listed(get(viewer_client, status=Run.Status.FAILED)) == [failed.pk]
    assert listed(get(viewer_client, stop_reason=Run.StopReason.CANCELLED)) == [cancelled.pk]
    assert listed(get(viewer_client, stop_reason=Run.StopReason.FINAL_ANSWER)) == [ok.pk]


def test_agent_filter(viewer_client, agents):
    alpha, beta = agents
    a = make_run(alpha)
    b = make_run(beta)
    assert listed(get(viewer_client, agent=alpha.pk)) == [a.pk]
    assert listed(get(viewer_client, agent=beta.pk)) == [b.pk]


def test_model_filter_matches_any_step(viewer_client, agents):
    alpha, _ = agents
    mixed = make_run(alpha, models=["big", "small"], created=DAY)
    only_small = make_run(alpha, models=["small"], created=DAY - timedelta(hours=1))
    make_run(alpha, models=["other"])
    assert listed(get(viewer_client, model="big")) == [mixed.pk]
    assert listed(get(viewer_client, model="small")) == [mixed.pk, only_small.pk]
    assert listed(get(viewer_client, model="nobody")) == []


def test_tool_filter_matches_any_call(viewer_client, agents):
    alpha, _ = agents
    weather = make_run(alpha, tools=["get_weather", "get_weather"])
    both = make_run(alpha, tools=["lookup_order", "get_weather"], created=DAY - timedelta(hours=1))
    make_run(alpha, tools=["search_tickets"])
    make_run(alpha)
    assert listed(get(viewer_client, tool="get_weather")) == [weather.pk, both.pk]
    assert listed(get(viewer_client, tool="lookup_order")) == [both.pk]


def test_model_and_tool_filters_take_part_of_a_known_name_in_any_case(viewer_client, agents):
    from toolsapp.models import Tool

    alpha, _ = agents
    Tool.objects.get_or_create(name="cancel_order", defaults={"description": "x", "parameters": {"type": "object"}})
    alpha.model_list = ["gpt-4o-mini", "claude-haiku"]
    alpha.save()
    cancels = make_run(alpha, tools=["cancel_order"], models=["gpt-4o-mini"])
    make_run(alpha, tools=["get_weather"], models=["claude-haiku"], created=DAY - timedelta(hours=1))
    assert listed(get(viewer_client, tool="cancel")) == [cancels.pk]
    assert listed(get(viewer_client, tool="CANCEL_ord")) == [cancels.pk]
    assert listed(get(viewer_client, model="4o")) == [cancels.pk]
    assert listed(get(viewer_client, tool="nothing like it")) == []


def test_date_range_includes_both_days(viewer_client, agents):
    alpha, _ = agents
    day = datetime(2026, 3, 10, tzinfo=UTC)
    before = make_run(alpha, created=day - timedelta(seconds=1))
    first = make_run(alpha, created=day)
    last = make_run(alpha, created=day + timedelta(days=1, hours=23, minutes=59))
    after = make_run(alpha, created=day + timedelta(days=2))
    assert listed(get(viewer_client, created_from="2026-03-10", created_to="2026-03-11")) == [last.pk, first.pk]
    assert listed(get(viewer_client, created_from="2026-03-12")) == [after.pk]
    assert listed(get(viewer_client, created_to="2026-03-09")) == [before.pk]


def test_text_search_is_case_insensitive_contains(viewer_client, agents):
    alpha, _ = agents
    hit = make_run(alpha, "Cancel order ORD-1001 please")
    make_run(alpha, "What's the weather in Lagos?")
    assert listed(get(viewer_client, q="order ord-1001")) == [hit.pk]
    assert listed(get(viewer_client, q="  CANCEL ")) == [hit.pk]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL trigram index")
def test_text_search_can_use_the_trigram_index_on_postgresql(agents):
    # The index must be on exactly the expression Django's icontains produces, or the planner
    # can never use it and every search reads the whole table. Sequential scans are switched
    # off here so the plan shows whether the index can serve the search at all.
    alpha, _ = agents
    hit = make_run(alpha, "Cancel order ORD-1001 please")
    runs = history.run_history(text="ord-1001")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = runs.query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "runs_run_task_trgm" in plan, plan
    assert list(runs) == [hit]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL index-only scans")
@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({"status": Run.Status.FAILED}, "run_status_created_id"),
        ({"stop_reason": Run.StopReason.MODEL_ERROR}, "run_stop_created_id"),
        ("agent", "run_agent_created_id"),
    ],
)
def test_a_filtered_page_of_ids_can_be_read_from_its_index_alone(agents, filters, index):
    # A late page of a filter (or one past its end) skips tens of thousands of runs: their ids in
    # the history's order must come from the filter's index, without visiting each run's row or
    # sorting (0.4 s for one status at a million runs when the index lacked the id). Other plans
    # are switched off so the plan shows whether the index can serve the page at all.
    alpha, _ = agents
    filters = {"agent": alpha} if filters == "agent" else filters
    runs = history.run_history(**filters).values_list("pk", flat=True)[5000:5051]
    with connection.cursor() as cursor:
        for plan_kind in ("seqscan", "bitmapscan", "sort", "indexscan"):
            cursor.execute(f"SET LOCAL enable_{plan_kind} = off")
        sql, params = runs.query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"Index Only Scan using {index}" in plan, plan
    assert "Sort" not in plan, plan


def test_filters_combine(viewer_client, agents):
    alpha, beta = agents
    failed = {"status": Run.Status.FAILED, "stop_reason": Run.StopReason.MODEL_ERROR}
    target = make_run(alpha, "refund", **failed, models=["big"], tools=["cancel_order"])
    make_run(beta, "refund", **failed, models=["big"], tools=["cancel_order"])
    make_run(alpha, "refund", status=Run.Status.SUCCEEDED, models=["big"], tools=["cancel_order"])
    make_run(alpha, "refund", **failed, models=["small"], tools=["cancel_order"])
    params = {
        "q": "REFUND",
        "status": Run.Status.FAILED,
        "agent": alpha.pk,
        "model": "big",
        "tool": "cancel_order",
        "created_from": "2026-03-10",
        "created_to": "2026-03-10",
    }
    assert listed(get(viewer_client, **params)) == [target.pk]


def test_pages_of_fifty_keep_the_filters(viewer_client, agents):
    alpha, beta = agents
    failed = [
        make_run(
            alpha, status=Run.Status.FAILED, stop_reason=Run.StopReason.MODEL_ERROR, created=DAY - timedelta(minutes=i)
        )
        for i in range(120)
    ]
    make_run(beta, created=DAY + timedelta(hours=1))  # newest, but filtered out
    first = get(viewer_client, status=Run.Status.FAILED)
    assert listed(first) == [r.pk for r in failed[:50]]
    html = first.content.decode()
    assert "120 runs" in html and "Page 1 of 3" in html
    next_href = re.search(r'href="([^"]+)" rel="next"', html).group(1).replace("&amp;", "&")
    assert "status=failed" in next_href and "page=2" in next_href
    second = viewer_client.get(reverse("run_list") + next_href)
    assert listed(second) == [r.pk for r in failed[50:100]]
    third = get(viewer_client, status=Run.Status.FAILED, page=3)
    assert listed(third) == [r.pk for r in failed[100:]]
    third_html = third.content.decode()
    assert 'rel="next"' not in third_html
    prev_href = re.search(r'href="([^"]+)" rel="prev"', third_html).group(1).replace("&amp;", "&")
    assert "status=failed" in prev_href and "page=2" in prev_href
    assert listed(get(viewer_client, status=Run.Status.FAILED, page=9)) == []
    assert listed(get(viewer_client, status=Run.Status.FAILED, page="zzz")) == listed(first)


def test_total_is_counted_up_to_a_cap(viewer_client, agents, monkeypatch):
    monkeypatch.setattr(history, "COUNT_CAP", 5)
    alpha, _ = agents
    for i in range(8):
        make_run(alpha, created=DAY - timedelta(minutes=i))
    page = history.run_history_page(history.run_history(), number=1, page_size=3)
    assert (page.total, page.total_is_exact, page.num_pages, page.has_next) == (6, False, None, True)
    html = get(viewer_client).content.decode()
    assert "More than 5 runs" in html
    assert len(listed(get(viewer_client))) == 8


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite counts a page's total from its ids")
def test_a_large_total_is_kept_a_moment_and_a_small_one_counted_afresh(viewer_client, agents, monkeypatch):
    monkeypatch.setattr(history, "COUNT_KEEP_FROM", 4)
    alpha, beta = agents
    for i in range(5):
        make_run(alpha, created=DAY - timedelta(minutes=i))
    for i in range(2):
        make_run(beta, created=DAY - timedelta(minutes=i))

    def total(agent) -> int:
        return history.run_history_page(history.run_history(agent=agent), number=1, page_size=2).total

    assert (total(alpha), total(beta)) == (5, 2)
    make_run(alpha, created=DAY)
    make_run(beta, created=DAY)
    # Paging through alpha's many runs does not count them again; beta's few are always counted.
    with CaptureQueriesContext(connection) as paged:
        assert total(alpha) == 5
    # (The rows' own query counts each run's rejected and edited calls: not a count of the runs.)
    assert not any(q["sql"].upper().startswith("SELECT COUNT(") for q in paged.captured_queries)
    assert total(beta) == 3
    # Another filter (another person's projects included) is another count.
    assert history.run_history_page(history.run_history(agent=alpha, status=Run.Status.SUCCEEDED),
                                     number=1, page_size=2).total == Run.objects.filter(
        agent=alpha, status=Run.Status.SUCCEEDED).count()
    assert "5 runs match" in get(viewer_client, agent=alpha.pk).content.decode()  # the page shows the kept total


@pytest.mark.parametrize(
    "params, field",
    [
        ({"status": "exploded"}, "status"),
        ({"stop_reason": "bored"}, "stop_reason"),
        ({"agent": "999999"}, "agent"),
        ({"agent": "alpha"}, "agent"),
        ({"created_from": "yesterday"}, "created_from"),
        ({"created_to": "2026-02-30"}, "created_to"),
        ({"created_from": "2026-03-11", "created_to": "2026-03-10"}, "created_to"),
        ({"q": "x" * 201}, "q"),
    ],
)
def test_bad_filter_values_show_errors(viewer_client, agents, params, field):
    make_run(agents[0])
    response = get(viewer_client, **params)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    html = response.content.decode()
    assert 'class="errorlist' in html and 'id="history-invalid"' in html
    assert listed(response) == []


def test_no_query_per_row(viewer_client, agents, django_assert_max_num_queries):
    alpha, beta = agents
    make_run(alpha, models=["big"], tools=["get_weather"])
    with CaptureQueriesContext(connection) as few:
        assert len(listed(get(viewer_client))) == 1
    # Filtered, as many queries as unfiltered (PostgreSQL's text search reads its matching texts
    # first: one query more, whatever the number of rows).
    with CaptureQueriesContext(connection) as few_filtered:
        assert len(listed(get(viewer_client, model="big", tool="get_weather", q="look"))) == 1
    assert len(few_filtered.captured_queries) <= len(few.captured_queries) + (connection.vendor == "postgresql")
    extra = [Agent.objects.create(name=f"agent-{i}") for i in range(10)]
    for i in range(60):
        make_run((alpha, beta, *extra)[i % 12], models=["big"], tools=["get_weather"])
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(listed(get(viewer_client))) == 50
    with django_assert_max_num_queries(len(few_filtered.captured_queries)):
        assert len(listed(get(viewer_client, model="big", tool="get_weather", q="look"))) == 50


def test_model_and_tool_filters_read_the_runs_own_names(agents):
    # Neither a join (a run listed once per matching step) nor a look through each run's steps
    # or calls (a probe per run skipped: 35,000 of them for a model's page 500 at a million runs).
    sql = str(history.run_history(model="big", tool="get_weather").query).upper()
    assert " JOIN " not in sql and "RUNS_STEP" not in sql and "RUNS_TOOLCALL" not in sql, sql


def test_the_database_keeps_each_runs_models_and_tools_whoever_inserts_them(agents):
    alpha, _ = agents
    run = make_run(alpha, models=["big", "small", "big"], tools=["get_weather", "get_weather", "delete"])
    stale = Run.objects.get(pk=run.pk)
    assert (stale.models_used, stale.tools_used) == ("\nbig\nsmall\n", "\nget_weather\ndelete\n")
    # Rows inserted in bulk, as the loop and forks do, are seen by the same triggers.
    Step.objects.bulk_create([Step(run=run, index=9, iteration=9, model="tiny", message={"role": "assistant"})])
    assert Run.objects.get(pk=run.pk).models_used == "\nbig\nsmall\ntiny\n"
    # An instance read before that, saved whole (the admin, a script), does not write the old names back.
    stale.task = "edited"
    stale.save()
    assert Run.objects.values_list("task", "models_used").get(pk=run.pk) == ("edited", "\nbig\nsmall\ntiny\n")
    assert history.run_history(model="tiny").get() == run
    # A copy (pk set to None, saved) is a new run: no steps, no names.
    stale.pk = None
    stale.save()
    assert Run.objects.values_list("models_used", "tools_used").get(pk=stale.pk) == ("", "")
    assert not history.run_history(model="TINY").exists()  # exact names, on SQLite as on PostgreSQL
    # A part of a name that no known model or tool holds matches nothing ("cancel" would find the
    # known tool cancel_order: names_like); a name is never matched inside another.
    assert not history.run_history(model="bi").exists() and not history.run_history(tool="delet").exists()


def test_every_page_of_every_filter_is_the_plain_slice_and_capped_count(agents, monkeypatch):
    """Pages found by ids first, with the total taken from those ids, are exactly the newest-first
    slice and the capped count of the filtered runs: random runs (equal creation times included,
    ordered by id then), filters alone and together, first, middle, last and past-the-end pages,
    pages inside and beyond the cap."""
    import random

    rng = random.Random(100)
    alpha, beta = agents
    for i in range(70):
        make_run(
            rng.choice([alpha, beta]),
            rng.choice(["refund the order", "look something up", "ORD-7"]),
            status=rng.choice([Run.Status.SUCCEEDED, Run.Status.FAILED]),
            created=DAY - timedelta(minutes=rng.randrange(30)),
            models=rng.sample(["big", "small"], rng.randrange(3)),
            tools=rng.sample(["get_weather", "delete"], rng.randrange(3)),
        )
    filters = [
        {},
        {"status": Run.Status.FAILED},
        {"model": "big"},
        {"tool": "delete", "agent": alpha},
        {"text": "refund"},
        {"text": "nowhere"},
        {"model": "small", "status": Run.Status.SUCCEEDED},
    ]
    compared = 0
    for cap in (10, 25, 10_000):
        monkeypatch.setattr(history, "COUNT_CAP", cap)
        for given in filters:
            runs = history.run_history(**given)
            everything = list(runs.values_list("pk", flat=True))
            for size in (3, 7, 50):
                for number in range(1, len(everything) // size + 3):
                    page = history.run_history_page(runs, number=number, page_size=size)
                    offset = (number - 1) * size
                    assert [r.pk for r in page.runs] == everything[offset : offset + size], (cap, given, size, number)
                    assert page.total == min(len(everything), cap + 1)
                    assert page.has_next == (len(everything) > offset + size)
                    compared += bool(page.runs)
    assert compared > 100
