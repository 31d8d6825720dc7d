"""Single sign-on gives roles per project: "billing-operators=operator@billing" makes a person of
that identity-provider group an operator in Billing only, and the role goes when the group does."""
import pytest

from accounts.sso_config import SsoConfigError, parse_role_map
from accounts.sso_users import sso_user_sign_in
from projects.models import Membership
from tests.projects import project

ISSUER = "https://idp.example.com"
ROLE_MAP = parse_role_map("platform=admin,billing-operators=operator@billing,billing-viewers=viewer@billing,"
                          "support-admins=admin@support")


def sign_in(*groups, sub="u-1"):
    return sso_user_sign_in(issuer=ISSUER, claims={"sub": sub, "groups": list(groups)}, claim="groups",
                            role_map=ROLE_MAP)


def roles(user) -> dict[str, str]:
    return {m.project.slug: m.role.name for m in Membership.objects.filter(user=user).select_related("project", "role")}


def test_the_role_map_reads_project_roles_and_says_what_is_wrong():
    assert ROLE_MAP["billing-operators"] == "operator@billing"
    with pytest.raises(SsoConfigError, match="names no project after @"):
        parse_role_map("billing=operator@")
    with pytest.raises(SsoConfigError, match="names no role"):
        parse_role_map("billing=boss@billing")


@pytest.mark.django_db
def test_a_group_gives_a_role_in_its_project_only_and_the_widest_wins():
    project("Billing"), project("Support")
    user = sign_in("billing-operators", "billing-viewers")
    assert roles(user) == {"billing": "operators"}
    assert not user.groups.exists()  # no site role: they see Billing only
    assert user.has_perm("runs.decide_approval", Membership.objects.get(user=user).project)


@pytest.mark.django_db
def test_the_project_role_goes_when_the_group_does_and_a_site_role_comes_with_its_group():
    project("Billing"), project("Support")
    sign_in("billing-operators", "support-admins")
    user = sign_in("billing-operators", "platform")
    assert roles(user) == {"billing": "operators"}
    assert list(user.groups.values_list("name", flat=True)) == ["admins"]


@pytest.mark.django_db
def test_a_membership_an_administrator_gave_in_an_unmapped_project_stays():
    project("Billing")
    other = project("Other")
    user = sign_in("billing-operators")
    from django.contrib.auth.models import Group
    Membership.objects.create(project=other, user=user, role=Group.objects.get(name="viewers"))
    sign_in("billing-operators")
    assert roles(user) == {"billing": "operators", "other": "viewers"}
