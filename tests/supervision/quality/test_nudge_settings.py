"""A project's nudge thresholds, set by its admins on the projects page: saved with the project
(and audited as its change), refused with words when out of range; an operator is refused (403)
and another team's admin finds no such project (404)."""
import pytest
from django.test import Client

from audit.models import AuditEntry
from projects.models import Project
from tests.projects import member, project

SETTINGS = "/projects/nudge/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def shop(demo_data):
    return project("Shop")


@pytest.mark.django_db(transaction=True)
def test_a_project_admin_turns_the_nudge_on_and_the_change_is_audited(shop):
    ann = signed_in(member("ann", shop, "admins"))
    form = ann.get("/projects/").content.decode()
    assert 'action="/projects/nudge/"' in form and 'name="nudge_after_quick_approvals"' in form
    response = ann.post(SETTINGS, {"project": "shop", "nudge_after_quick_approvals": "5", "quick_approval_seconds": "4"})
    assert response.status_code == 302
    page = ann.get("/projects/").content.decode()
    assert "After 5 quick approvals in a row (each within 4 s), the next card in Shop asks for a reason" in page
    shop.refresh_from_db()
    assert (shop.nudge_after_quick_approvals, shop.quick_approval_seconds) == (5, 4)
    entry = AuditEntry.objects.filter(kind="project", action="updated").latest("pk")
    assert entry.actor_name == "ann" and "nudge_after_quick_approvals" in entry.after


@pytest.mark.django_db(transaction=True)
def test_values_out_of_range_are_refused_with_words(shop):
    ann = signed_in(member("ann", shop, "admins"))
    ann.post(SETTINGS, {"project": "shop", "nudge_after_quick_approvals": "3", "quick_approval_seconds": "0"})
    page = ann.get("/projects/").content.decode()
    assert "greater than or equal to 1" in page
    assert Project.objects.get(pk=shop.pk).nudge_after_quick_approvals == 0


@pytest.mark.django_db(transaction=True)
def test_an_operator_is_refused_and_another_teams_admin_finds_nothing(shop):
    other = project("Other")
    operator = signed_in(member("cy", shop, "operators"))
    assert 'action="/projects/nudge/"' not in operator.get("/projects/").content.decode()
    change = {"project": "shop", "nudge_after_quick_approvals": "1", "quick_approval_seconds": "60"}
    assert operator.post(SETTINGS, change).status_code == 403
    assert signed_in(member("bea", other, "admins")).post(SETTINGS, change).status_code == 404
    assert Project.objects.get(pk=shop.pk).nudge_after_quick_approvals == 0
