"""A call that needs two people in a project where too few may decide can never be approved: the
queue's card says why and what would unblock it, the tool page warns before it happens, and the
names of who may decide come from the project's roles and the site's."""
import html as html_lib

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from projects.holders import holders, names_text
from runs.models import Agent, Approval, Run
from runs.roles import PERM_DECIDE
from runs.supervision.queue.no_approver import no_approver_text
from tests.projects import member, project
from tests.support.approval_fixtures import pending_approval
from toolsapp.models import Tool
from toolsapp.services import tool_notices
from toolsapp.two_people import critical_warning

pytestmark = pytest.mark.django_db


@pytest.fixture
def billing(demo_data):
    """Billing, where the demo agent works, with one admin (who may decide calls) and one viewer."""
    billing = project("Billing")
    Agent.objects.filter(name="demo").update(project=billing)
    member("ada", billing, "admins")
    member("vic", billing, "viewers")
    return billing


def test_holders_are_the_projects_deciders_and_the_sites(billing):
    root = User.objects.create_superuser("root", password="pw-root-long-enough")
    other = project("Other")
    member("olga", other, "operators")
    found = holders(PERM_DECIDE, {billing.pk, other.pk})
    assert set(found[billing.pk].values()) == {"ada", "root"}
    assert set(found[other.pk].values()) == {"olga", "root"}
    assert found[billing.pk][root.pk] == "root"
    User.objects.filter(username="ada").update(is_active=False)
    assert set(holders(PERM_DECIDE, {billing.pk})[billing.pk].values()) == {"root"}


def test_names_read_as_a_sentence():
    assert names_text([]) == ""
    assert names_text(["ada"]) == "ada"
    assert names_text(["ada", "bo"]) == "ada or bo"
    assert names_text(["a", "b", "c", "d", "e"]) == "a, b, c or 2 others"


def test_the_card_text_names_who_is_left_out_and_what_to_do():
    assert no_approver_text(needed=1, possible=["bo"], launcher="ada", voters=[], project="Billing") == ""
    text = no_approver_text(needed=2, possible=[], launcher="ada", voters=[], project="Billing")
    assert text == ("No one can give this call the 2 more approvals it needs: no one else may approve it in Billing "
                    "(left out: ada, who launched the run). Reject it, or ask an admin of Billing to give another "
                    "person the operator role there.")
    assert "only bo may still approve it" in no_approver_text(needed=2, possible=["bo"], launcher="", voters=["cy"],
                                                              project="Billing")


def test_the_queue_card_says_why_no_one_can_approve_a_critical_call(billing, launch, client):
    ada = User.objects.get(username="ada")
    approval = pending_approval(launch("Cancel order ORD-1001", approval_policy="ask"))
    Approval.objects.filter(pk=approval.pk).update(required_approvals=2)
    Run.objects.filter(pk=approval.run_id).update(created_by=ada)
    client.force_login(ada)
    page = html_lib.unescape(client.get(reverse("approval_queue")).content.decode())
    card = page[page.index(f'data-approval-id="{approval.pk}"'):]
    card = card[: card.index("</article>")]
    assert "No one can give this call the 2 more approvals it needs: no one else may approve it in Billing" in card
    assert "(left out: ada, who launched the run)" in card
    # A second operator: one may approve, still not two.
    member("bo", billing, "operators")
    card = html_lib.unescape(client.get(reverse("approval_detail", args=[approval.pk])).content.decode())
    assert "only bo may still approve it in Billing" in card
    member("cy", billing, "operators")
    assert "No one can give" not in client.get(reverse("approval_queue")).content.decode()


def test_the_tool_page_warns_that_a_critical_tool_of_a_one_decider_project_is_never_approved(billing, client):
    tool = Tool.objects.get(name="cancel_order")
    Tool.objects.filter(pk=tool.pk).update(project=billing, critical=True)
    assert critical_warning(critical=True, project_id=billing.pk, project_name="Billing") == (
        "Its calls can never be approved: each needs two different people's approval, and only ada may decide "
        "calls in Billing. Give a second person the operator role in Billing, or clear Critical.")
    client.force_login(User.objects.get(username="ada"))
    page = html_lib.unescape(client.get(reverse("tool_detail", args=[tool.pk])).content.decode())
    assert "yes: each call needs two different people's approval, neither the run's launcher." in page
    assert "Its calls can never be approved" in page
    # Saving the flag says it at once (the notices shown after a save).
    assert "Its calls can never be approved" in " ".join(tool_notices(tool=Tool.objects.get(pk=tool.pk)))
    member("bo", billing, "operators")
    assert critical_warning(critical=True, project_id=billing.pk, project_name="Billing").startswith(
        "Only ada or bo may decide calls in Billing: a call in a run one of them launched can never be approved")
    member("cy", billing, "operators")
    assert critical_warning(critical=True, project_id=billing.pk, project_name="Billing") == ""
    assert critical_warning(critical=False, project_id=billing.pk) == ""
    assert critical_warning(critical=True, project_id=None) == ""  # shared by the site: judged nowhere


def test_the_tool_page_says_what_each_setting_does_in_one_sentence(billing, client):
    tool = Tool.objects.get(name="cancel_order")
    client.force_login(User.objects.get(username="ada"))
    page = html_lib.unescape(client.get(reverse("tool_detail", args=[tool.pk])).content.decode())
    assert ("no: a call that waits for approval may be approved by a rule, a grant or the run's approval policy, "
            "not only by a person.") in page
    assert "Destructive calls always go to a person" not in page
    Tool.objects.filter(pk=tool.pk).update(always_ask=True, allow_argument_edits=False)
    page = html_lib.unescape(client.get(reverse("tool_detail", args=[tool.pk])).content.decode())
    assert "yes: a person decides each call; rules, grants and a run's approval policy never approve one." in page
    assert "no: a call runs with the model's arguments or not at all; no one may change them." in page
