"""A project's people are managed on the projects page, not in Django's admin: its admins add a
person with a role, change it, remove them, and map their chat identities (a Slack member id to
the account its clicks act as); site administrators do it for any project. An operator of the
project is refused (403); a person of another project finds no such project (404). Every change
is in the audit log."""
import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from accounts.models import ChatIdentity
from audit.models import AuditEntry
from projects.models import Membership
from tests.projects import member, project


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alpha(demo_data):
    """Alpha with two admins' worth of people: ann (admin), cy (operator); Beta with bea (admin);
    dan has an account and no role; vic works in both projects."""
    a, b = project("Alpha"), project("Beta")
    people = {"ann": member("ann", a, "admins"), "cy": member("cy", a, "operators"), "bea": member("bea", b, "admins"),
              "vic": member("vic", a, "viewers"), "dan": User.objects.create_user("dan", password="pw-long-enough-1")}
    member("vic", b, "viewers")
    return {"a": a, "b": b, **people}


def answer(response) -> str:
    """What the card of the project said after a change (the page the change sent the person back to)."""
    assert response.status_code == 302 and response["Location"].startswith("/projects/#project-"), response
    return response.client.get("/projects/").content.decode()


ADD, CHANGE = "/projects/members/add/", "/projects/members/change/"
MAP, UNMAP = "/projects/chat-identities/add/", "/projects/chat-identities/remove/"


def role(project_, username: str) -> str | None:
    found = Membership.objects.filter(project=project_, user__username=username).select_related("role").first()
    return found.role.name if found else None


@pytest.mark.django_db(transaction=True)
def test_a_project_admin_adds_changes_and_removes_people_of_their_project(alpha):
    ann = signed_in(alpha["ann"])
    page = answer(ann.post(ADD, {"project": "alpha", "username": "dan", "role": "operators"}))
    assert "dan is now operator in Alpha." in page and role(alpha["a"], "dan") == "operators"
    entry = AuditEntry.objects.filter(kind="project role", action="created").latest("pk")
    assert (entry.actor_name, entry.via) == ("ann", "page")

    dan = Membership.objects.get(project=alpha["a"], user__username="dan")
    answer(ann.post(CHANGE, {"membership": dan.pk, "role": "viewers", "action": "change"}))
    assert role(alpha["a"], "dan") == "viewers"
    assert AuditEntry.objects.filter(kind="project role", action="updated", actor_name="ann").exists()
    page = answer(ann.post(CHANGE, {"membership": dan.pk, "action": "remove"}))
    assert "dan no longer has a role in Alpha." in page and role(alpha["a"], "dan") is None
    assert AuditEntry.objects.filter(kind="project role", action="deleted", actor_name="ann").exists()


@pytest.mark.django_db(transaction=True)
def test_bad_values_are_refused_with_a_reason(alpha):
    ann = signed_in(alpha["ann"])
    assert "No account is named “nobody”" in answer(ann.post(ADD, {"project": "alpha", "username": "nobody", "role": "viewers"}))
    assert "cy is already operator here" in answer(ann.post(ADD, {"project": "alpha", "username": "cy", "role": "admins"}))
    assert "Select a valid choice" in answer(ann.post(ADD, {"project": "alpha", "username": "dan", "role": "root"}))
    assert role(alpha["a"], "cy") == "operators" and role(alpha["a"], "dan") is None
    # The last admin neither leaves nor steps down (the team could no longer manage its project)...
    mine = Membership.objects.get(project=alpha["a"], user=alpha["ann"])
    assert "ann is the last admin of Alpha" in answer(ann.post(CHANGE, {"membership": mine.pk, "action": "remove"}))
    answer(ann.post(CHANGE, {"membership": mine.pk, "role": "viewers", "action": "change"}))
    assert role(alpha["a"], "ann") == "admins"
    # ...once someone else is admin, she may.
    cy = Membership.objects.get(project=alpha["a"], user=alpha["cy"])
    answer(ann.post(CHANGE, {"membership": cy.pk, "role": "admins", "action": "change"}))
    answer(ann.post(CHANGE, {"membership": mine.pk, "action": "remove"}))
    assert role(alpha["a"], "ann") is None


@pytest.mark.django_db(transaction=True)
def test_operators_and_other_teams_are_refused_and_site_administrators_are_not(alpha):
    cy_membership = Membership.objects.get(project=alpha["a"], user=alpha["cy"])
    changes = [(ADD, {"project": "alpha", "username": "dan", "role": "admins"}),
               (CHANGE, {"membership": cy_membership.pk, "action": "remove"}),
               (CHANGE, {"membership": cy_membership.pk, "role": "admins", "action": "change"})]
    cy, bea = signed_in(alpha["cy"]), signed_in(alpha["bea"])
    for url, data in changes:
        assert cy.post(url, data).status_code == 403, url  # of the project, without managing it
        assert bea.post(url, data).status_code == 404, url  # another team: no such project
        assert Client().post(url, data).status_code == 302  # to sign in
    # Naming her own project does not reach Alpha's member either.
    assert bea.post(CHANGE, {"project": "beta", "membership": cy_membership.pk, "action": "remove"}).status_code == 404
    assert role(alpha["a"], "cy") == "operators" and role(alpha["a"], "dan") is None
    # The operator's page shows the people without the forms.
    page = cy.get("/projects/").content.decode()
    assert "cy" in page and "/members/" not in page and "/chat-identities/" not in page

    sam = User.objects.create_user("sam")
    sam.groups.add(Group.objects.get(name="admins"))  # the site role: every project
    answer(signed_in(sam).post(ADD, {"project": "beta", "username": "dan", "role": "viewers"}))
    assert role(alpha["b"], "dan") == "viewers"


@pytest.mark.django_db(transaction=True)
def test_a_project_admin_maps_and_removes_chat_identities_of_their_people(alpha):
    ann = signed_in(alpha["ann"])
    page = answer(ann.post(MAP, {"project": "alpha", "member_id": " u024be7lh ", "username": "cy"}))
    assert "U024BE7LH now acts as cy in chat." in page
    # The form offers the project's other people, never the person's own account.
    offered = re.search(r'id="id_alpha_chat_username"[^>]*>(.*?)</select>', page, re.S).group(1)
    assert '<option value="cy"' in offered and '<option value="ann"' not in offered
    identity = ChatIdentity.objects.get(member_id="U024BE7LH")
    assert identity.user == alpha["cy"]
    entry = AuditEntry.objects.filter(kind="chat identity", action="created").latest("pk")
    assert (entry.actor_name, entry.after["member_id"]) == ("ann", "U024BE7LH")

    # A superuser (or anyone with a site role) of the project: their clicks would decide anything anywhere.
    User.objects.create_superuser("zed", password="pw-long-enough-1")
    member("zed", alpha["a"], "viewers")
    member("eve", alpha["a"], "viewers")
    refusals = {
        ("U0ZED", "zed"): "zed also works where you are no admin",
        ("hello", "cy"): "A Slack member ID looks like U024BE7LH",
        ("U024BE7LH", "ann"): "Nobody maps their own chat identity",
        ("U024BE7LH", "eve"): "U024BE7LH already acts as cy: remove that first.",
        ("U0VIC", "vic"): "vic also works where you are no admin",  # a viewer of Beta too
        ("U0DAN", "dan"): "Select a valid choice",  # not of Alpha
    }
    for (member_id, username), reason in refusals.items():
        assert reason in answer(ann.post(MAP, {"project": "alpha", "member_id": member_id, "username": username}))
    assert ChatIdentity.objects.count() == 1

    # Other people: an operator of Alpha (403), Beta's admin (404), nobody signed in.
    removal = {"project": "alpha", "identity": identity.pk}
    assert signed_in(alpha["cy"]).post(UNMAP, removal).status_code == 403
    assert signed_in(alpha["bea"]).post(UNMAP, removal).status_code == 404
    assert signed_in(alpha["bea"]).post(UNMAP, {"project": "beta", "identity": identity.pk}).status_code == 404
    assert signed_in(alpha["bea"]).post(MAP, {"project": "alpha", "member_id": "U0BEA", "username": "cy"}).status_code == 404
    assert Client().post(UNMAP, removal).status_code == 302
    assert ChatIdentity.objects.filter(pk=identity.pk).exists()

    page = answer(ann.post(UNMAP, removal))
    assert "U024BE7LH no longer acts as anyone in chat." in page and not ChatIdentity.objects.exists()
    assert AuditEntry.objects.filter(kind="chat identity", action="deleted", actor_name="ann").exists()


@pytest.mark.django_db(transaction=True)
def test_a_site_administrator_maps_a_person_of_several_projects(alpha):
    root = User.objects.create_superuser("root", password="pw-long-enough-1")
    answer(signed_in(root).post(MAP, {"project": "alpha", "member_id": "U0VIC", "username": "vic"}))
    assert ChatIdentity.objects.get(member_id="U0VIC").user == alpha["vic"]
