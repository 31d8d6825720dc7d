"""Operators' notes (the message lever, a fork's message) are bounded wherever they come in: the
page's form, the fork form, the API (and its schema), the websocket lever and the table itself, each
with a sentence that names the limit; an over-long note changes nothing."""
import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from runs.lifecycle import forks
from runs.models import OperatorMessage, Run
from runs.models.levers import NOTE_MAX_CHARS
from tests.controls.test_levers_api import api, socket_levers
from tests.controls.test_levers_forks_pages import (
    FOUR_STEPS,
    signed_in,
    users,  # noqa: F401  (a fixture)
)
from tests.web.websockets.test_consumer_timeline import session_cookie  # noqa: F401  (a fixture)

LONG = "x" * (NOTE_MAX_CHARS + 1)
TOO_LONG = f"The message is longer than {NOTE_MAX_CHARS} characters."


def test_the_table_refuses_a_note_longer_than_the_limit(launch):
    run = launch("Cancel order ORD-1001")
    note = OperatorMessage(run=run, text=LONG, author_name="olga")
    with pytest.raises(ValidationError) as invalid:  # the admin's and any model form's check
        note.full_clean()
    assert f"at most {NOTE_MAX_CHARS} characters" in str(invalid.value) or str(NOTE_MAX_CHARS) in str(invalid.value)
    with pytest.raises(IntegrityError), transaction.atomic():  # a write that skipped every check
        OperatorMessage.objects.create(run=run, text=LONG, author_name="olga")
    OperatorMessage.objects.create(run=run, text="x" * NOTE_MAX_CHARS, author_name="olga")  # the limit itself fits
    assert OperatorMessage.objects.filter(run=run).count() == 1


def test_an_over_long_note_over_the_websocket_is_refused_in_words(launch, session_cookie, no_dispatch):  # noqa: F811 (the fixture)
    run = launch("Cancel order ORD-1001")
    cookie = session_cookie("operators", name="olga")
    refused, = socket_levers(run.pk, cookie, {"type": "lever", "lever": "message", "text": LONG})
    assert refused == {"type": "error", "lever": "message",
                       "message": f"The message is too long: at most {NOTE_MAX_CHARS} characters."}
    assert not OperatorMessage.objects.filter(run=run).exists()


def test_a_forks_message_is_bounded_in_the_api_and_its_schema(launch, script, alice, monkeypatch):
    monkeypatch.setattr(forks, "run_dispatch", lambda run_id: None)
    schema = api(alice).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    message = schema["components"]["schemas"]["ForkEditRequest"]["properties"]["message"]
    assert message["maxLength"] == NOTE_MAX_CHARS

    parent = launch(models=[script(*FOUR_STEPS)])
    response = api(alice).post(f"/api/v1/runs/{parent.pk}/fork/", {"step": 2, "edit": {"message": LONG}}, format="json")
    assert (response.status_code, response.json()["detail"]) == (400, f"edit: message: {TOO_LONG}")
    assert Run.objects.count() == 1


def test_the_fork_form_puts_an_over_long_message_error_on_the_text(client, users, launch, script, monkeypatch):  # noqa: F811
    monkeypatch.setattr(forks, "run_dispatch", lambda run_id: None)
    parent = launch(models=[script(*FOUR_STEPS)])
    signed_in(client, users["operator"])
    response = client.post(reverse("run_fork", args=[parent.pk]), {"step": 2, "edit": "message", "content": LONG})
    assert response.status_code == 400
    assert response.context["form"].errors["content"] == [TOO_LONG]
    assert Run.objects.count() == 1
