"""The pages no view of ours draws: the error pages (400, 403, 404, 500, a refused form) and DRF's
raw API pages. Each is a page of the site: a language, a phone's viewport, one main landmark, and
no secret or stack trace; the raw API pages keep their forms, with named buttons."""
import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.web.views import errors


def page_basics(html: str) -> None:
    assert '<html lang="en">' in html
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    assert html.count("<main") == 1


@pytest.fixture
def admin_client(db):
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@localhost", "unused-password-1"))
    return client


def test_a_missing_page_says_so_in_the_site_s_page(admin_client):
    response = admin_client.get("/no/such/page/")
    html = response.content.decode()
    assert response.status_code == 404 and "There is no page here" in html and "/no/such/page/" in html
    page_basics(html)


def test_the_other_error_pages_are_the_site_s_pages(rf, db):
    request = rf.get("/somewhere/")
    for response, heading in (
        (errors.bad_request(request, ValueError("x")), "This request could not be read"),
        (errors.permission_denied(request, PermissionError("Only admins of Billing change its budgets.")),
         "Only admins of Billing change its budgets."),
        (errors.server_error(request), "The server failed to answer"),
    ):
        html = response.content.decode()
        assert heading in html
        page_basics(html)


def test_a_refused_form_says_what_to_do(admin_client, db):
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.get(username="root"))
    response = client.post("/account/tokens/", {"name": "x"})
    html = response.content.decode()
    assert response.status_code == 403 and "reload the page and send it again" in html
    page_basics(html)


def test_the_raw_api_page_is_the_site_s_page_with_its_forms(admin_client, demo_data):
    response = admin_client.get("/api/v1/agents/", HTTP_ACCEPT="text/html")
    html = response.content.decode()
    assert response.status_code == 200 and "<h1>Agent List</h1>" in html
    page_basics(html)
    assert 'id="topbar"' in html  # the site's header, not DRF's navbar
    assert '<button class="primary">POST to Agent List</button>' in html and 'name="_content"' in html
    assert "demo" in html  # the answer itself
