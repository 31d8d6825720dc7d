"""A page's form over Django's limits on what it reads: a short page saying the limit in words, one
WARNING line in the log and no ERROR with a traceback (Django's own answer was a bare "Bad Request
(400)" and an ERROR from django.security, before the CSRF check even reached a view)."""
import logging

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evals.models import Case, Dataset
from runs.models import Run
from tests.support.approval_fixtures import make_user

OVER = "x" * (10 * 1024 * 1024 + 1)


def signed_in(user) -> Client:
    client = Client(enforce_csrf_checks=True)  # as a browser: the CSRF check reads the form first
    client.force_login(user)
    client.get(reverse("run_launch"))  # the CSRF cookie
    return client


def test_a_form_over_10_mb_gets_a_page_saying_the_limit_and_no_traceback(demo_data, caplog):
    caplog.set_level(logging.INFO)
    client = signed_in(make_user("opal", "operators"))
    token = client.cookies["csrftoken"].value
    fields = {"csrfmiddlewaretoken": token, "agent": "demo", "task": OVER}
    answers = [client.post(reverse("run_launch"), fields),  # multipart, as the test client sends forms
               client.post(reverse("run_launch"), "&".join(f"{k}={v}" for k, v in fields.items()),
                           content_type="application/x-www-form-urlencoded")]
    for response in answers:
        assert response.status_code == 413 and response["Content-Type"].startswith("text/html")
        assert "The request body is larger than 10 MB, the most this server reads." in response.content.decode()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
    assert "Request Entity Too Large: /runs/new/" in caplog.text
    assert not Run.objects.exists()


def test_a_dataset_file_over_10_mb_is_refused_on_its_page_in_words(demo_data, caplog):
    client = signed_in(make_user("opal", "operators"))
    dataset = Dataset.objects.create(name="big")
    upload = SimpleUploadedFile("cases.jsonl", OVER.encode())
    response = client.post(reverse("dataset_import", args=[dataset.pk]),
                           {"file": upload, "csrfmiddlewaretoken": client.cookies["csrftoken"].value}, follow=True)
    assert response.status_code == 200 and "The file is larger than 10 MB." in response.content.decode()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
    assert not Case.objects.exists()
