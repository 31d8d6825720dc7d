"""The tokens page (/account/tokens/): a person makes a token, limited to a project of theirs or
not, sees its key in that answer only, lists their tokens (never a key) and revokes one after
confirming; the key then stops opening the API."""
import re

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import ApiToken
from tests.projects import member, project

KEY = re.compile(r"ags_[A-Za-z0-9_-]{20,}")


@pytest.fixture
def alpha(db):
    return project("Alpha")


@pytest.fixture
def alice(alpha):
    project("Beta")  # a project alice has no role in
    return member("alice", alpha)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def make(client, **fields):
    return client.post(reverse("api_tokens"), {"name": "finance export", "days": "", "project": "", **fields})


def test_a_token_limited_to_a_project_is_shown_once_and_opens_that_project_only(alice, alpha):
    client = signed_in(alice)
    page = client.get(reverse("api_tokens")).content.decode()
    assert '<option value="alpha">Alpha</option>' in page and "Beta" not in page  # only her projects
    made = make(client, project="alpha", days="7")
    assert made.status_code == 200 and "no-store" in made["Cache-Control"]
    (key,) = set(KEY.findall(made.content.decode()))
    token = ApiToken.objects.get(user=alice)
    assert (token.name, token.project, key.startswith(token.prefix)) == ("finance export", alpha, True)
    assert with_token(key).get("/api/v1/runs/").status_code == 200
    assert [t["name"] for t in with_token(key).get("/api/v1/tokens/").json()] == ["finance export"]

    again = client.get(reverse("api_tokens")).content.decode()
    assert KEY.findall(again) == [] and "finance export" in again and f"{token.prefix}…" in again
    assert "Alpha" in again.split('id="token-list-heading"')[1]  # the limit, in the list


def test_bad_input_is_refused_in_words_and_keeps_what_was_typed(alice, settings):
    settings.API_TOKEN_DAYS = 30
    client = signed_in(alice)
    too_long = make(client, days="31", name="kept name")
    assert too_long.status_code == 400 and "At most 30 days." in too_long.content.decode()
    assert 'value="kept name"' in too_long.content.decode()
    elsewhere = make(client, project="beta")
    assert elsewhere.status_code == 400 and "Select a valid choice" in elsewhere.content.decode()
    unnamed = make(client, name="")
    assert unnamed.status_code == 400 and "This field is required." in unnamed.content.decode()
    assert not ApiToken.objects.exists() and not KEY.findall(too_long.content.decode())


def test_revoking_asks_first_then_the_key_stops_working(alice):
    client = signed_in(alice)
    (key,) = set(KEY.findall(make(client).content.decode()))
    token = ApiToken.objects.get()
    url = reverse("api_token_revoke", args=[token.pk])
    confirm = client.get(url).content.decode()
    assert "Revoke finance export" in confirm and token.revoked_at is None and ApiToken.objects.get().revoked_at is None
    done = client.post(url, follow=True)
    assert "finance export is revoked" in done.content.decode()
    refused = with_token(key).get("/api/v1/runs/")
    assert refused.status_code == 401 and refused.json()["detail"] == "Token has been revoked."
    assert f'href="{url}"' not in done.content.decode()  # no Revoke link for a revoked token


def test_another_person_s_token_is_not_there_and_revoking_needs_the_csrf_token(alice, alpha):
    client = signed_in(alice)
    make(client)
    token = ApiToken.objects.get()
    bob = signed_in(member("bob", alpha))
    url = reverse("api_token_revoke", args=[token.pk])
    assert bob.get(url).status_code == 404 and bob.post(url).status_code == 404
    assert "finance export" not in bob.get(reverse("api_tokens")).content.decode()
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(alice)
    assert forged.post(url).status_code == 403
    assert ApiToken.objects.get().revoked_at is None


def test_signed_out_people_are_sent_to_sign_in(db):
    response = Client().get(reverse("api_tokens"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
