"""The memories page: who may read it, who may correct or delete a fact, and what it shows."""
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from memory.models import Memory, MemoryRead
from memory.selectors import PAGE_SIZE, READERS_SHOWN
from tests.support.approval_fixtures import make_user


@pytest.fixture
def admin(demo_data):
    return make_user("ada", "admins")


@pytest.fixture
def fact(save):
    return save("Acme ships by rail, never by air", customer="acme")


def list_url(fact):
    return reverse("agent_memories", args=[fact.agent_id])


def edit_url(fact):
    return reverse("memory_edit", args=[fact.agent_id, fact.pk])


def delete_url(fact):
    return reverse("memory_delete", args=[fact.agent_id, fact.pk])


def test_anonymous_visitors_are_sent_to_sign_in(client, fact):
    for url in (list_url(fact), edit_url(fact), delete_url(fact)):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next=")
        assert client.post(url, {"text": "changed text"}).status_code == 302
    assert Memory.objects.get().text == "Acme ships by rail, never by air"


@pytest.mark.parametrize("role", ["viewer", "alice"])  # a viewer, an operator
def test_viewers_and_operators_read_the_facts_but_change_nothing(request, client, fact, role):
    client.force_login(request.getfixturevalue(role))
    html = client.get(list_url(fact)).content.decode()
    assert "Acme ships by rail, never by air" in html
    assert edit_url(fact) not in html and delete_url(fact) not in html
    for url in (edit_url(fact), delete_url(fact)):
        assert client.get(url).status_code == 403
        assert client.post(url, {"text": "changed text"}).status_code == 403
    assert Memory.objects.get().text == "Acme ships by rail, never by air"


def test_a_person_without_a_role_may_not_read_them(client, fact, demo_data):
    client.force_login(User.objects.create_user("nobody"))
    assert client.get(list_url(fact)).status_code == 403


def test_a_role_that_sees_agents_but_not_their_memories_may_not_read_them(client, fact, demo_data):
    # Roles are the installation's own (runs/roles.py): one may show agents and runs but keep
    # what the agents remember of customers from its people.
    from django.contrib.auth.models import Group, Permission

    watchers = Group.objects.create(name="agent-watchers")
    watchers.permissions.add(*Permission.objects.filter(
        content_type__app_label="runs", codename__in=["view_agent", "view_run"]))
    person = User.objects.create_user("wendy")
    person.groups.add(watchers)
    client.force_login(person)
    page = client.get(reverse("agent_detail", args=[fact.agent_id]))
    assert page.status_code == 200 and 'id="agent-memories"' not in page.content.decode()
    assert client.get(list_url(fact)).status_code == 403


def test_the_agent_page_links_to_its_memories(client, fact, viewer):
    client.force_login(viewer)
    html = client.get(reverse("agent_detail", args=[fact.agent_id])).content.decode()
    assert f'href="{list_url(fact)}" id="agent-memories"' in html


def test_an_admin_corrects_a_fact_and_the_search_finds_its_new_words(client, fact, admin):
    client.force_login(admin)
    html = client.get(list_url(fact)).content.decode()
    assert edit_url(fact) in html and delete_url(fact) in html
    assert "Acme ships by rail" in client.get(edit_url(fact)).content.decode()
    response = client.post(edit_url(fact), {"text": "  Acme ships by sea  "})
    assert response.status_code == 302 and response["Location"] == list_url(fact)
    fact.refresh_from_db()
    assert (fact.text, fact.edited_by) == ("Acme ships by sea", admin)
    assert "by ada" in client.get(list_url(fact)).content.decode()
    found = client.get(list_url(fact), {"q": "sea"}).content.decode()
    assert "Acme ships by sea" in found and "1 fact matches" in found
    assert "No fact holds any of these words" in client.get(list_url(fact), {"q": "rail"}).content.decode()


def test_an_invalid_correction_is_shown_and_changes_nothing(client, fact, admin):
    client.force_login(admin)
    for text in ("ab", "x" * 1001, "   "):
        response = client.post(edit_url(fact), {"text": text})
        assert response.status_code == 200 and 'class="errorlist' in response.content.decode()
    assert Memory.objects.get().text == "Acme ships by rail, never by air"


def test_an_admin_deletes_a_fact_after_a_confirmation(client, fact, admin, run_for):
    MemoryRead.objects.create(memory=fact, run=run_for("acme"))
    client.force_login(admin)
    page = client.get(delete_url(fact)).content.decode()
    assert "Delete fact #" in page and "Acme ships by rail, never by air" in page
    assert Memory.objects.exists()  # the GET only asks
    response = client.post(delete_url(fact))
    assert response.status_code == 302 and response["Location"] == list_url(fact)
    assert not Memory.objects.exists() and not MemoryRead.objects.exists()


def test_posts_without_the_csrf_token_are_refused(fact, admin):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    assert client.post(edit_url(fact), {"text": "changed text"}).status_code == 403
    assert client.post(delete_url(fact)).status_code == 403
    assert Memory.objects.get().text == "Acme ships by rail, never by air"


def test_a_fact_of_another_agent_is_not_found_under_this_one(client, fact, admin, demo_data):
    from runs.models import Agent

    other = Agent.objects.get(name="demo")
    client.force_login(admin)
    assert client.get(reverse("memory_edit", args=[other.pk, fact.pk])).status_code == 404
    assert client.post(reverse("memory_delete", args=[other.pk, fact.pk])).status_code == 404
    assert Memory.objects.exists()


def test_the_customer_filter_shows_one_scope(client, save, viewer):
    save("Acme ships by rail", customer="acme")
    save("Globex ships by rail", customer="globex")
    fact = save("Runs without a customer ship by rail", customer="")
    client.force_login(viewer)
    html = client.get(list_url(fact), {"customer": "c:globex"}).content.decode()
    assert "Globex ships by rail" in html and "Acme ships" not in html
    html = client.get(list_url(fact), {"customer": "c:", "q": "rail"}).content.decode()
    assert "Runs without a customer" in html and "Acme ships" not in html and "Globex ships" not in html
    assert '<option value="c:" selected>(no customer)</option>' in html


def test_each_fact_lists_its_last_readers_and_how_many_read_it_in_a_fixed_number_of_queries(
    client, save, run_for, viewer
):
    facts = [save(f"fact number {n} about rail", customer="acme") for n in range(PAGE_SIZE + 3)]
    readers = [run_for("acme") for _ in range(READERS_SHOWN + 2)]
    for run in readers:
        MemoryRead.objects.create(memory=facts[-1], run=run)
        MemoryRead.objects.create(memory=facts[-1], run=run)  # twice by one run: one reader
    MemoryRead.objects.create(memory=facts[-2], run=readers[0])
    client.force_login(viewer)
    with CaptureQueriesContext(connection) as queries:
        html = client.get(list_url(facts[0])).content.decode()
    assert len(queries) <= 12
    assert html.count('class="card fact"') == PAGE_SIZE
    newest = html.split(f'data-memory-id="{facts[-1].pk}"')[1].split("</li>")[0]
    assert f"the last {READERS_SHOWN} of {READERS_SHOWN + 2} runs" in newest
    assert f'/runs/{readers[-1].pk}/' in newest and f'/runs/{readers[0].pk}/' not in newest
    second = html.split(f'data-memory-id="{facts[-2].pk}"')[1].split("</li>")[0]
    assert f'/runs/{readers[0].pk}/' in second and "the last" not in second
    assert 'rel="next"' in html
    assert html.count('class="card fact"') == PAGE_SIZE
    assert client.get(list_url(facts[0]), {"page": 2}).content.decode().count('class="card fact"') == 3
