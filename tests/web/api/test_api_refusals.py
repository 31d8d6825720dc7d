"""Every refusal of the API is JSON with a "detail" sentence, whatever refuses it: Django's limits
on what it reads (a body over 10 MB, too many fields), the parsers, the router, a bug. A refusal of
the client's request is one WARNING line in the log, never an ERROR with a traceback."""
import json
import logging

import pytest
from rest_framework.test import APIClient

from evals.models import Case, Dataset
from runs.models import Run
from runs.web.api.views import MetricsView
from tests.support.approval_fixtures import make_user
from tests.web.api.test_api import api

LIMIT = 10 * 1024 * 1024  # what the README and the import's schema promise
OVER = "x" * (LIMIT + 1)


@pytest.fixture
def operator(demo_data):
    return api(make_user("opal", "operators"))


@pytest.fixture
def dataset(demo_data):
    return Dataset.objects.create(name="weather")


def no_traceback_logged(caplog) -> bool:
    return not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_a_body_over_10_mb_is_a_json_413_saying_the_limit(operator, dataset, caplog):
    caplog.set_level(logging.INFO)
    imports = f"/api/v1/datasets/{dataset.pk}/import/"
    answers = {
        "launch, JSON": operator.post("/api/v1/runs/", {"agent": "demo", "task": OVER}, format="json"),
        "launch, form": operator.post("/api/v1/runs/", {"agent": "demo", "task": OVER}, format="multipart"),
        "launch, urlencoded": operator.post("/api/v1/runs/", f"agent=demo&task={OVER}",
                                            content_type="application/x-www-form-urlencoded"),
        "import, JSON": operator.post(imports, {"jsonl": OVER}, format="json"),
        "import, JSONL": operator.post(imports, OVER, content_type="application/x-ndjson"),
    }
    for what, response in answers.items():
        assert response.status_code == 413, (what, response.content[:200])
        assert response["Content-Type"] == "application/json", what
        assert "larger than 10 MB" in response.json()["detail"], what
    assert answers["launch, JSON"].json()["detail"] == "The request body is larger than 10 MB, the most this server reads."
    assert no_traceback_logged(caplog), [(r.levelname, r.getMessage()) for r in caplog.records]
    assert "Request Entity Too Large: /api/v1/runs/" in caplog.text  # one WARNING line each, as for any 4xx
    assert not Run.objects.exists() and not Case.objects.exists()


def test_an_import_between_django_s_default_and_10_mb_is_read(operator, dataset):
    # 30 cases of 100,000 characters: 3 MB of JSON, over Django's default 2.5 MB.
    lines = "\n".join(json.dumps({"name": f"case {n}", "task": "t" * 100_000}) for n in range(1, 31))
    response = operator.post(f"/api/v1/datasets/{dataset.pk}/import/", {"jsonl": lines}, format="json")
    assert response.status_code == 201, response.content[:300]
    assert response.json()["imported"] == 30


def test_too_many_form_fields_is_a_json_400_saying_the_limit(operator, caplog):
    body = "&".join(f"field{n}=1" for n in range(1001))
    response = operator.post("/api/v1/runs/", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert response.json() == {"detail": "The request has more than 1,000 fields, the most this server reads."}
    assert no_traceback_logged(caplog)


@pytest.mark.parametrize("method, path, body, content_type, status", [
    ("post", "/api/v1/runs/", "{not json", "application/json", 400),
    ("post", "/api/v1/runs/", "agent: demo", "text/plain", 415),
    ("delete", "/api/v1/metrics/", "", "application/json", 403),  # a method it does not take
    ("get", "/api/v1/nothing-here/", "", "application/json", 404),
    ("post", "/api/nothing/at/all", "", "application/json", 404),
])
def test_other_refusals_are_json_with_a_detail(demo_data, method, path, body, content_type, status):
    client = api(make_user("ada", "admins"))
    response = getattr(client, method)(path, body, content_type=content_type)
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]


def test_a_session_write_without_its_csrf_token_is_json(demo_data):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(make_user("opal", "operators"))
    response = client.post("/api/v1/runs/", {"agent": "demo", "task": "hi"}, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]


def test_a_bug_under_api_is_a_json_500(demo_data, monkeypatch):
    def broken(self, request, *args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(MetricsView, "get", broken)
    client = api(make_user("opal", "operators"))
    client.raise_request_exception = False
    response = client.get("/api/v1/metrics/")
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert "the error is in its log" in response.json()["detail"]


def test_a_request_for_another_host_is_json_under_api(demo_data):
    response = APIClient().get("/api/v1/runs/", HTTP_HOST="elsewhere.example")
    assert response.status_code == 400
    assert response.json() == {"detail": "This server does not answer to the host name the request was sent to."}


def test_a_site_served_under_a_prefix_answers_its_apis_refusals_in_json_too(demo_data, monkeypatch):
    # Mounted at /agents/ by its proxy (SCRIPT_NAME): the API's paths are /agents/api/... to the client.
    def broken(self, request, *args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(MetricsView, "get", broken)
    client = api(make_user("opal", "operators"))
    client.raise_request_exception = False
    failed = client.get("/api/v1/metrics/", SCRIPT_NAME="/agents")
    assert failed.status_code == 500 and failed["Content-Type"] == "application/json"
    assert "the error is in its log" in failed.json()["detail"]
    wrong_host = APIClient().get("/api/v1/runs/", SCRIPT_NAME="/agents", HTTP_HOST="elsewhere.example")
    assert wrong_host.status_code == 400
    assert wrong_host.json() == {"detail": "This server does not answer to the host name the request was sent to."}
