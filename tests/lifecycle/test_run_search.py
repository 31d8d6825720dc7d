"""The history's search over what runs answered and what their tools returned, beside their tasks:
written when a run ends, found by any case and part of a word, on SQLite and PostgreSQL."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.lifecycle import run_list as history
from runs.lifecycle import run_search
from runs.lifecycle.archive import runs_delete
from runs.lifecycle.run_search import run_search_store
from runs.models import Run, RunSearchText

WEATHER_THEN_TICKET = (
    {"tool_calls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}}]},
    {"content": "It is sunny in Lagos; I filed nothing, ticket Zanzibar-42 stays open."},
)


def found(text: str) -> list[int]:
    return sorted(history.run_history(text=text).values_list("pk", flat=True))


def test_a_run_is_found_by_its_answer_and_by_what_a_tool_returned_in_any_case(launch, script):
    weather = launch("Check the weather", models=[script(*WEATHER_THEN_TICKET)])
    other = launch("Say hello", models=[script({"content": "Hello there."})])
    assert weather.status == Run.Status.SUCCEEDED and other.status == Run.Status.SUCCEEDED
    assert found("zanzibar-42") == [weather.pk]  # the answer, another case
    assert found("SUNNY") == [weather.pk]  # the tool's result: {"conditions": "sunny", ...}
    assert found("temperature_c") == [weather.pk]
    assert found("hello") == [other.pk]  # the task and the answer both hold it: listed once
    assert found("weather") == [weather.pk]  # the task, as before
    assert found("nowhere-to-be-found") == []


def test_a_short_search_reads_tasks_only_and_symbols_are_plain_text(launch, script):
    run = launch("Check the weather", models=[script(*WEATHER_THEN_TICKET)])
    assert found("la") == []  # in the answer and the result, but two letters search tasks only
    assert found("Ch") == [run.pk]
    # Quotes, stars and words FTS5 would read as operators are looked for as they are typed.
    # "-42" is in the answer ("Zanzibar-42"), '"sunny' and 'sunny"' in the result's JSON; the rest nowhere.
    for text, expected in [('"sunny', [run.pk]), ('sunny"', [run.pk]), ("-42", [run.pk]), ("sun*", []),
                           ("Lagos AND", []), ("(sunny", []), ("%", []), ("_", []), ("%%%", []), ("___", [])]:
        assert found(text) == expected, text
    assert found('"sunny"') == [run.pk]  # the result's JSON holds the quotes
    assert found("sun*") == [] and found("NOT sunny") == [] and found("Lagos AND") == []
    assert found("42 stays") == [run.pk]


def test_a_run_still_going_is_found_by_its_task_until_it_ends(launch, script):
    run = launch("Cancel order ORD-1001")  # the demo model asks to cancel: it waits for a person
    assert run.status == Run.Status.AWAITING_APPROVAL
    assert found("ord-1001") == [run.pk]
    assert found("standing desk") == []  # what lookup_order returned: searchable once it ends
    assert not RunSearchText.objects.filter(run=run).exists()


def test_a_stopped_runs_summary_is_searched_as_its_answer(launch, script, django_user_model):
    run = launch("Check the weather", models=[script(*WEATHER_THEN_TICKET)])
    run_search_store(run_id=run.pk, answer="A summary about Timbuktu")  # what summary_added writes
    assert found("timbuktu") == [run.pk]
    assert found("zanzibar") == []  # the summary replaced the earlier answer


def test_a_deleted_run_leaves_nothing_behind_to_find(launch, script):
    run = launch("Check the weather", models=[script(*WEATHER_THEN_TICKET)])
    assert found("zanzibar") == [run.pk]
    runs_delete(run_ids=[run.pk])
    assert found("zanzibar") == []
    assert not RunSearchText.objects.exists()
    again = launch("Check the weather", models=[script(*WEATHER_THEN_TICKET)])
    assert found("zanzibar") == [again.pk]


def test_the_history_page_finds_a_run_by_its_answer(launch, script, client, django_user_model):
    from django.contrib.auth.models import Group

    run = launch("Check the weather", models=[script(*WEATHER_THEN_TICKET)])
    launch("Say hello", models=[script({"content": "Hello there."})])
    viewer = django_user_model.objects.create_user("vera")
    viewer.groups.add(Group.objects.get(name="viewers"))
    client.force_login(viewer)
    page = client.get(reverse("run_list"), {"q": "Zanzibar"})
    assert page.status_code == 200
    assert [r.pk for r in page.context["page"].runs] == [run.pk]
    assert "answers and tool results too" in page.content.decode()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL trigram indexes")
def test_on_postgresql_the_search_reads_the_trigram_indexes_of_tasks_and_texts(launch, script, monkeypatch):
    # Sequential scans off: the plans show whether the indexes can serve the search at all.
    # A full scan of another index (created_at, filtered row by row) is just as cheap on a table
    # of two rows, so the planner may pick it: where a check is about the trigram index being
    # usable at all, plain index scans are off too and only bitmap scans of the indexes remain.
    run = launch("Check the weather", models=[script(*WEATHER_THEN_TICKET)])
    other = launch("Say hello", models=[script({"content": "Hello there."})])

    def plans(text, index_scans=True):
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
            if not index_scans:
                cursor.execute("SET enable_indexscan = off")
        with CaptureQueriesContext(connection) as read:
            runs = history.run_history(text=text)  # reads the matching texts' run ids
            sql, params = runs.query.sql_with_params()
        found = list(runs)
        explained = []
        # Whether any experiment run exists (the history hides them then): read from its partial index.
        hides = [q["sql"] for q in read.captured_queries if '"runs_run"."experiment"' in q["sql"]]
        assert len(hides) == 1
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + hides[0])
            assert "run_experiment_id" in "\n".join(row[0] for row in cursor.fetchall())
            reads = [(q["sql"], None) for q in read.captured_queries if q["sql"] not in hides]
            for statement, args in reads + [(sql, params)]:
                cursor.execute("EXPLAIN " + statement, args)
                explained.append("\n".join(row[0] for row in cursor.fetchall()))
            cursor.execute("SET enable_seqscan = on")
            cursor.execute("SET enable_indexscan = on")
        return found, explained

    found, (texts, runs) = plans("zanzibar", index_scans=False)  # a few matching texts: their ids, then both indexes
    assert found == [run]
    assert "runs_runsearchtext_trgm" in texts, texts
    assert "runs_run_task_trgm" in runs and "runs_run_pkey" in runs, runs
    monkeypatch.setattr(run_search, "FEW_TEXTS", 0)  # "many": one statement, newest runs first
    found, (texts, runs) = plans("there")  # in "Hello there.", the other run's answer
    assert found == [other]
    assert "runs_runsearchtext_trgm" in runs and "runs_run_created_id_desc" in runs, runs


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_the_migration_writes_the_search_text_of_runs_that_had_ended(demo_data):
    old = migrate([("runs", "0025_webhooks")])
    try:
        Agent, Run_, Step, ToolCall = (old.get_model("runs", n) for n in ("Agent", "Run", "Step", "ToolCall"))
        agent = Agent.objects.get(name="demo")
        ended = Run_.objects.create(agent=agent, task="t", status="succeeded", answer="Answer about Ouagadougou")
        step = Step.objects.create(run=ended, index=1, iteration=1, message={})
        ToolCall.objects.create(run=ended, step=step, index=0, call_id="c1", tool_name="get_weather",
                                result_text='{"city": "Reykjavik"}')
        Run_.objects.create(agent=agent, task="going to Reykjavik", status="running", answer="")
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        assert found("ouagadougou") == [ended.pk]
        assert list(RunSearchText.objects.values_list("run_id", flat=True)) == [ended.pk]  # ended runs only
        assert len(found("reykjavik")) == 2  # one by its tool's result, one still going by its task
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
