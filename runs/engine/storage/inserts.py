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

from django.db import models

from runs.engine.storage.db import thread_connection

# Columns whose preparation returns a value of exactly this type unchanged (their get_prep_value
# is `to_python`, `float()` or nothing, and the backends do not adapt them): such a value is sent
# as it is. Exact classes only: a subclass may prepare its values differently. Integers are not
# here: PostgreSQL's backend wraps them in the column's integer type.
_SENT_AS_IS = {models.CharField: str, models.TextField: str, models.BooleanField: bool, models.FloatField: float}


@functools.cache
def _fields(model) -> tuple:
    """The concrete columns an INSERT of `model` writes: all but an auto primary key."""
    return tuple(f for f in model._meta.concrete_fields if not (f.primary_key and f.auto_created or f is model._meta.auto_field))


@functools.cache
def _preparers(model) -> tuple:
    """(field, attribute, the type of value it sends as it is, or None) for each column of `_fields`."""
    return tuple((f, f.attname, _SENT_AS_IS.get(type(f))) for f in _fields(model))


def _prepared(obj, preparers, conn) -> list:
    values = []
    for field, attname, as_is in preparers:
        if as_is is not None:
            value = getattr(obj, attname)  # pre_save of these classes reads the attribute
            if type(value) is as_is or value is None:
                values.append(value)
                continue
        values.append(field.get_db_prep_save(field.pre_save(obj, True), conn))
    return values


@functools.cache
def _statement(model, rows: int, vendor: str) -> str:
    quote = thread_connection().ops.quote_name
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
    preparers = _preparers(model)
    conn = thread_connection()
    params = []
    for obj in objs:
        params.extend(_prepared(obj, preparers, conn))
    with conn.cursor() as cursor:
        cursor.execute(_statement(model, len(objs), conn.vendor), params)
        ids = cursor.fetchall()
    for obj, (pk,) in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = conn.alias
