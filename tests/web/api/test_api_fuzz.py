"""Schemathesis generates requests from the API's own OpenAPI document: none may get a 500, and
every documented answer must match its schema.

In-process over WSGI, signed in as an admin with a token, on the test database (SQLite or
PostgreSQL: NUL characters and out-of-range integers only hurt the latter). A run parked on an
approval and a finished one give the generated ids something to hit. Launches and decisions are
recorded, not handed to a worker.
"""
import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.services import api_token_create
from runs.controls import levers
from runs.lifecycle import forks
from runs.lifecycle import launch as launch_module
from tests.support.approval_fixtures import make_user

EXAMPLES = {GenerationMode.POSITIVE: 12, GenerationMode.NEGATIVE: 8}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def takes_input(operation) -> bool:
    return any(len(part) for part in (operation.path_parameters, operation.query, operation.body))


@pytest.fixture
def fuzz_world(launch, no_dispatch, monkeypatch):
    monkeypatch.setattr(launch_module, "run_dispatch", lambda run_id: None)  # a launch or a re-run
    monkeypatch.setattr(levers, "run_dispatch", lambda run_id: None)  # a resume
    monkeypatch.setattr(forks, "run_dispatch", lambda run_id: None)
    launch()
    launch("Cancel order ORD-1001")
    admin = make_user("fuzzy", "admins")
    return {"Authorization": f"Token {api_token_create(user=admin)[1]}"}


@pytest.mark.slow  # over a minute on its own: ./test runs it, ./test-fast does not
def test_generated_requests_never_get_a_server_error(fuzz_world):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode, examples in EXAMPLES.items():
            if mode is GenerationMode.NEGATIVE and not takes_input(operation):
                continue  # nothing to make invalid

            @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate, Phase.shrink])
            @given(case=operation.as_strategy(generation_mode=mode))
            def exercise(case):
                case.call_and_validate(headers=fuzz_world, checks=CHECKS)

            try:
                exercise()
            except Exception as exc:  # collect every operation's failure, then report them together
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)
