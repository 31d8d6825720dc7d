"""Full-text search over facts: the one place that knows how each database does it.

A query is split at spaces into terms, and a fact matches when it holds any term (OR), best
matches first: a model asking "shipping preference of acme" should find "Acme ships by rail"
although it holds only one of the words. Each term is handed to the database's own parser as
plain text, never as query syntax, so `"`, `*`, `OR`, `NEAR(` or `-` in a query are words or
nothing, never an operator or a syntax error.

- PostgreSQL: `to_tsvector('simple', text)` (no stemming, no stop words: facts are names, ids
  and short phrases in any language) served by a GIN index on that expression (migration 0001);
  each term is `plainto_tsquery('simple', term)`, the terms joined with `||`, ranked by ts_rank.
- SQLite: an FTS5 table over the facts (external content, kept in step by triggers, migration
  0001); each term is one quoted FTS5 phrase, the phrases joined with OR, ranked by bm25.
"""
import re

from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector
from django.db import connections
from django.db.models import F, QuerySet
from django.db.models.expressions import RawSQL

from memory.models import Memory

FTS_TABLE = "memory_memory_fts"  # SQLite only (migration 0001)
MAX_TERMS = 16
CONFIG = "simple"


def query_terms(query: str) -> list[str]:
    """The query's terms: its space-separated pieces that hold a letter or a digit, at most
    MAX_TERMS of them, without repeats (pieces of punctuation alone would match nothing)."""
    # A NUL is a space here: PostgreSQL refuses it in any text.
    terms = [piece for piece in query.replace("\0", " ").split() if re.search(r"\w", piece)]
    return list(dict.fromkeys(terms))[:MAX_TERMS]


def memory_search(*, memories: QuerySet, query: str) -> QuerySet:
    """The facts of `memories` that match `query`, best match first (newest first among equals);
    none when the query has no term."""
    terms = query_terms(query)
    if not terms:
        return memories.none()
    if connections[memories.db].vendor == "postgresql":
        return _postgresql(memories, terms)
    return _sqlite(memories, terms)


def _postgresql(memories: QuerySet, terms: list[str]) -> QuerySet:
    # SearchVector compiles to to_tsvector('simple'::regconfig, COALESCE(text, '')): the very
    # expression the GIN index is built on, so the index serves the match.
    vector = SearchVector("text", config=CONFIG)
    wanted = SearchQuery(terms[0], config=CONFIG, search_type="plain")
    for term in terms[1:]:
        wanted = wanted | SearchQuery(term, config=CONFIG, search_type="plain")
    return (
        memories.annotate(match_vector=vector).filter(match_vector=wanted)
        .annotate(rank=SearchRank(vector, wanted)).order_by(F("rank").desc(), "-created_at", "-pk")
    )


def _sqlite(memories: QuerySet, terms: list[str]) -> QuerySet:
    # A quoted phrase is tokenized as text; a quote inside it is written twice.
    expression = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    table = Memory._meta.db_table
    matching = RawSQL(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", [expression])  # noqa: S611 - constant names; the query is a parameter
    # bm25 is lower for a better match; it is read for the matching facts of the scope only.
    rank = RawSQL(  # noqa: S611 - constant names; the query is a parameter
        f'SELECT bm25({FTS_TABLE}) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s AND rowid = "{table}"."id"',
        [expression],
    )
    return memories.filter(pk__in=matching).annotate(rank=rank).order_by("rank", "-created_at", "-pk")
