"""The loop's own INSERTs (runs/engine/storage/inserts.py) store exactly the rows the ORM would store."""
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.engine.storage.inserts import insert
from runs.models import RunEvent, Step, ToolCall

# Values of every kind a column of these tables holds, including the ones a shortcut could get
# wrong: non-ASCII and empty text, None, a float that is whole, booleans, nested JSON, an integer
# in a float column and text-like values that are not exactly `str` (a lazy translation).
STEP_FIELDS = dict(
    index=7, iteration=3, kind=Step.Kind.TURN, preamble=[{"role": "user", "content": "héllo"}],
    model="démo-model", tool_choice="auto", tool_choice_fallback=True, finish_reason="",
    message={"role": "assistant", "content": "Zürich ☀", "tool_calls": []}, latency_ms=12,
    tokens_in=120, tokens_out=0, cost_usd=1.0, model_errors=[], reasoning="", notes=[],
)
CALL_FIELDS = dict(
    index=0, call_id="call_ü1", tool_name="get_weather", arguments='{"city": "Lagos"}', args_hash="abc",
    status=ToolCall.Status.SUCCEEDED, result={"ok": True, "n": [1, 2.5, None]}, result_text="", truncated=True,
    latency_ms=None, attempts=2, started_at=None,
)


def _rows(model, pks):
    return [{k: v for k, v in row.items() if k not in ("id", "created_at", "step_id")}
            for row in model.objects.filter(pk__in=pks).order_by("pk").values()]


@pytest.mark.django_db
def test_the_rows_inserted_are_the_ones_the_orm_stores(launch):
    from django.utils.translation import gettext_lazy

    run = launch()
    lazy = gettext_lazy("Succeeded")
    variants = [dict(STEP_FIELDS), dict(STEP_FIELDS, finish_reason=lazy, cost_usd=2, tool_choice_fallback=False)]
    for number, fields in enumerate(variants):
        ours, theirs = Step(run=run, **fields), Step(run=run, **fields)
        ours.index, theirs.index = 100 + number, 200 + number  # (run, index) is unique
        insert([ours])
        theirs.save()
        assert ours.pk and not ours._state.adding
        mine, orm = _rows(Step, [ours.pk]), _rows(Step, [theirs.pk])
        mine[0]["index"] = orm[0]["index"]
        assert mine == orm

        when = timezone.now() - timedelta(seconds=5)
        call_fields = dict(CALL_FIELDS, call_id=f"call-{number}", started_at=when if number else None,
                           result_text=lazy if number else "", latency_ms=3 if number else None)
        ours_calls = [ToolCall(run=run, step=ours, **call_fields)]
        theirs_call = ToolCall(run=run, step=theirs, **call_fields)
        insert(ours_calls)
        theirs_call.save()
        assert _rows(ToolCall, [ours_calls[0].pk]) == _rows(ToolCall, [theirs_call.pk])
        assert ToolCall.objects.get(pk=ours_calls[0].pk).result_text == str(call_fields["result_text"])

    seq = run.event_seq
    events = [RunEvent(run=run, seq=seq + 1, kind="step", data={"a": "ß", "b": [1.5, True, None]}),
              RunEvent(run=run, seq=seq + 2, kind="run", data={})]
    insert(events)
    stored = list(RunEvent.objects.filter(pk__in=[e.pk for e in events]).order_by("seq").values_list("seq", "kind", "data"))
    assert stored == [(seq + 1, "step", {"a": "ß", "b": [1.5, True, None]}), (seq + 2, "run", {})]
