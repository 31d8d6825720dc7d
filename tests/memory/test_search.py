"""The full-text search over facts, the same on SQLite (FTS5) and PostgreSQL (tsvector): words in
any order, any of them, best match first, within one agent and one customer, whatever the query holds."""
import pytest

from memory.models import Memory
from memory.search import MAX_TERMS, memory_search, query_terms
from runs.models import Agent

pytestmark = pytest.mark.django_db


def found(query: str, *, agent=None, customer: str | None = None) -> list[str]:
    memories = Memory.objects.all()
    if agent is not None:
        memories = memories.filter(agent=agent)
    if customer is not None:
        memories = memories.filter(customer=customer)
    return [m.text for m in memory_search(memories=memories, query=query)]


@pytest.fixture
def facts(save):
    save("Acme wants invoices sent to billing@acme.test", customer="acme")
    save("Acme ships by rail, never by air", customer="acme")
    save("Order ORD-1001 was refunded in March", customer="acme")
    save("Globex ships by air freight", customer="globex")
    save("Runs without a customer answer in English", customer="")


def test_a_word_finds_the_facts_that_hold_it_whatever_its_case(facts):
    assert found("RAIL", customer="acme") == ["Acme ships by rail, never by air"]
    assert found("invoices", customer="acme") == ["Acme wants invoices sent to billing@acme.test"]


def test_any_word_matches_and_a_fact_holding_more_of_them_comes_first(facts):
    assert found("ships air", customer="acme") == ["Acme ships by rail, never by air"]
    assert found("acme rail", customer="acme")[0] == "Acme ships by rail, never by air"
    assert set(found("acme rail", customer="acme")) == {
        "Acme ships by rail, never by air", "Acme wants invoices sent to billing@acme.test",
    }


def test_identifiers_and_addresses_are_found_as_written(facts):
    assert found("ORD-1001", customer="acme") == ["Order ORD-1001 was refunded in March"]
    assert found("billing@acme.test", customer="acme") == ["Acme wants invoices sent to billing@acme.test"]


def test_no_match_finds_nothing(facts):
    assert found("submarine", customer="acme") == []
    assert found("", customer="acme") == []
    assert found("   ", customer="acme") == []


def test_another_customer_and_the_runs_without_one_keep_their_own_facts(facts):
    assert found("air", customer="globex") == ["Globex ships by air freight"]
    assert found("freight", customer="acme") == []
    assert found("english", customer="") == ["Runs without a customer answer in English"]
    assert found("acme", customer="") == []


def test_another_agents_facts_are_not_found(facts, memo_agent, run_for, save):
    other = Agent.objects.create(name="other")
    save("Acme ships by rail (the other agent's note)", customer="acme", run=run_for("acme", agent=other))
    assert found("rail", agent=memo_agent, customer="acme") == ["Acme ships by rail, never by air"]
    assert found("rail", agent=other, customer="acme") == ["Acme ships by rail (the other agent's note)"]


@pytest.mark.parametrize("query", [
    '"', "*", "OR", "NEAR(", "-", "AND", "NOT", "(", ")", "^", ":", "'", "\\", "&|!", "<->", '""', "((", "NEAR(a b",
    'rail"', "rail*", "-rail", "rail OR", "OR rail", "rail AND NOT air", "rail NEAR(air", "text: rail", "{rail}",
    "rail & air", "rail | air", "!rail", "rail:*", "'rail'", "rail\0", "\u200brail",
])
def test_query_syntax_in_the_query_is_only_words(facts, query):
    texts = found(query, customer="acme")
    if "rail" in query:  # the word is found; nothing around it is an operator (no prefix, no negation)
        assert "Acme ships by rail, never by air" in texts
    else:
        assert texts == []


def test_a_fact_holding_or_is_found_by_the_word_or(save):
    save("Tea or coffee: coffee, black", customer="acme")
    assert found("OR", customer="acme") == ["Tea or coffee: coffee, black"]


def test_an_edited_fact_is_found_by_its_new_words_and_a_deleted_one_not_at_all(facts):
    fact = Memory.objects.get(text__startswith="Acme ships")
    fact.text = "Acme ships by sea"
    fact.save()
    assert found("rail", customer="acme") == []
    assert found("sea", customer="acme") == ["Acme ships by sea"]
    fact.delete()
    assert found("sea", customer="acme") == []


def test_terms_are_bounded_and_repeats_dropped():
    assert query_terms('rail "  *  rail - NEAR( air') == ["rail", "NEAR(", "air"]
    assert len(query_terms(" ".join(f"w{n}" for n in range(100)))) == MAX_TERMS


def test_the_database_index_serves_the_search(facts):
    """PostgreSQL: the GIN index on the very expression the search matches with. SQLite: the
    FTS5 table, kept in step with the facts by triggers."""
    from django.db import connection

    # Every fact: within one scope (at most MEMORY_MAX_FACTS) the planner may rather read the scope's index.
    query = memory_search(memories=Memory.objects.all(), query="rail")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: the planner would read them all
            sql, params = query.query.sql_with_params()
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "memory_memory_text_fts" in plan, plan
    else:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memory_memory_fts WHERE memory_memory_fts MATCH 'rail'")
            assert cursor.fetchone()[0] == 1
            cursor.execute("INSERT INTO memory_memory_fts(memory_memory_fts, rank) VALUES ('integrity-check', 1)")
    assert [m.text for m in query] == ["Acme ships by rail, never by air"]
