"""A tool's sensitive fields (masked in the approvals queue) never reach the call's error, the
timeline every viewer receives or the logs: not through a schema error, a handler's exception or
a model server's error body. Through the real loop and the demo model over HTTP."""
import json
import logging

import pytest

from runs.models import Run, RunEvent, ToolCall
from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler
from toolsapp.models import Tool

CARD = "4111-1111-SECRET-42"
SCHEMA = {
    "type": "object",
    "properties": {"card_number": {"type": "string", "pattern": "^[0-9]{16}$"}, "amount": {"type": "number"}},
    "required": ["card_number", "amount"],
    "additionalProperties": False,
}


@python_handler("test_charge_declines")
def _charge_declines(arguments, context):
    raise ToolError(f"card {arguments['card_number']} was declined")


@python_handler("test_charge_crashes")
def _charge_crashes(arguments, context):
    raise ValueError(f"cannot parse card {arguments['card_number']!r}")


@pytest.fixture
def charge_tool(demo_data):
    def make(handler="test_charge_declines", parameters=None):
        return Tool.objects.create(
            name="charge_card", description="Charge a card.", parameters=parameters or SCHEMA,
            handler=handler, sensitive_fields=["card_number"], timeout_seconds=5,
        )
    return make


def call_once(launch, script, arguments, *then):
    model = script({"tool_calls": [{"id": "c1", "name": "charge_card", "arguments": arguments}]},
                   *(then or ({"content": "done"},)))
    return launch("charge the card", models=[model], tools=["charge_card"], summarize_on_stop=False)


def everything_recorded(run) -> str:
    """The call's error, every timeline event and the run's own texts, as one string."""
    calls = [call.error for call in ToolCall.objects.filter(run=run)]
    events = [event.data for event in RunEvent.objects.filter(run=run)]
    return json.dumps([calls, events, run.stop_detail], ensure_ascii=False)


def test_a_pattern_error_on_a_sensitive_field_names_the_field_and_rule_never_the_value(
    launch, script, charge_tool, caplog
):
    charge_tool()
    caplog.set_level(logging.DEBUG)
    run = call_once(launch, script, {"card_number": CARD, "amount": 5})

    call = ToolCall.objects.get(run=run)
    assert call.status == ToolCall.Status.FAILED  # refused before it ran
    assert "card_number" in call.error and "pattern" in call.error and "^[0-9]{16}$" in call.error
    recorded = everything_recorded(run)
    assert CARD not in recorded and CARD not in caplog.text
    assert "card_number" in recorded


def test_other_fields_still_quote_the_value_for_the_model(launch, script, charge_tool):
    charge_tool()
    run = call_once(launch, script, {"card_number": "4111111111111111", "amount": "five"})
    assert "'five' is not of type 'number'" in ToolCall.objects.get(run=run).error


def test_a_handlers_error_text_has_the_sensitive_value_blanked(launch, script, charge_tool, caplog):
    charge_tool(parameters={"type": "object"})
    caplog.set_level(logging.DEBUG)
    run = call_once(launch, script, {"card_number": CARD, "amount": 5})
    call = ToolCall.objects.get(run=run)
    assert call.error == "card •••• was declined"
    assert CARD not in everything_recorded(run) and CARD not in caplog.text


def test_a_handlers_crash_is_logged_with_its_traceback_but_without_the_value(launch, script, charge_tool, caplog):
    charge_tool(handler="test_charge_crashes", parameters={"type": "object"})
    caplog.set_level(logging.DEBUG)
    run = call_once(launch, script, {"card_number": CARD, "amount": 5})
    call = ToolCall.objects.get(run=run)
    assert call.error == "the tool failed with an unexpected ValueError"
    assert "Traceback" in caplog.text and "cannot parse card '••••'" in caplog.text
    assert CARD not in everything_recorded(run) and CARD not in caplog.text


def test_a_model_error_body_echoing_a_sensitive_argument_is_blanked(launch, script, charge_tool, caplog):
    charge_tool(parameters={"type": "object"})
    caplog.set_level(logging.DEBUG)
    echo = {"status": 400, "error": f"bad request: messages[2].tool_calls[0].arguments card_number={CARD} " + "x" * 3000}
    run = call_once(launch, script, {"card_number": CARD, "amount": 5}, echo)
    assert run.stop_reason == Run.StopReason.MODEL_ERROR
    assert "card_number=••••" in run.stop_detail and len(run.stop_detail) < 1000
    assert CARD not in everything_recorded(run) and CARD not in caplog.text
