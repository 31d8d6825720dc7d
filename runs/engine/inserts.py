"""INSERTs of the rows the loop writes every iteration (a step, its calls, timeline events).

`Model.objects.create()` and `bulk_create()` spend most of their CPU building the statement
(query objects, the compiler, per-field lookups) rather than sending it: about a millisecond per
row on a worker, a fifth of an iteration. Here the statement for a model, a set of columns and a
number of rows is built once per process, and each value still goes through its field's
`pre_save` (auto_now_add) and `get_db_prep_save` (JSON, dates), so the row stored is exactly
the one the ORM would store. The new primary keys are set on the instances (RETURNING: PostgreSQL,
and SQLite 3.35 and later, which Django 5.2 requires).
"""
import functools

from django.db import connection


@functools.cache
def _fields(model) -> tuple:
    """The concrete columns an INSERT of `model` writes: all but an auto primary key."""
    return tuple(f for f in model._meta.concrete_fields if not (f.primary_key and f.auto_created or f is model._meta.auto_field))


@functools.cache
def _statement(model, rows: int, vendor: str) -> str:
    quote = connection.ops.quote_name
    fields = _fields(model)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    return (
        f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES {', '.join([row] * rows)} RETURNING {quote(model._meta.pk.column)}"
    )


def insert(objs: list) -> None:
    """INSERT model instances of one model in one statement, setting each one's primary key and
    its state as saved (as `bulk_create` does)."""
    if not objs:
        return
    model = type(objs[0])
    fields = _fields(model)
    params = []
    for obj in objs:
        params.extend(f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields)
    with connection.cursor() as cursor:
        cursor.execute(_statement(model, len(objs), connection.vendor), params)
        ids = cursor.fetchall()
    for obj, (pk,) in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = connection.alias
