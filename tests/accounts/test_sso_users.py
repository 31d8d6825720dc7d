"""Who a sign-in through the identity provider signs in, and with which roles."""

import pytest
from django.contrib.auth.models import Group, User

from accounts.models import SsoIdentity
from accounts.sso_users import NO_ROLE, SignInRefused, sso_user_sign_in
from projects.models import Membership
from runs.roles import PERM_DECIDE, PERM_VIEW
from tests.projects import project

ISSUER = "https://idp.example.com"
ROLE_MAP = {"agentsite-admins": "admin", "agentsite-operators": "operator", "everyone": "viewer"}

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def roles(demo_data):
    pass


def sign_in(sub="u-1", groups=("everyone",), **claims):
    return sso_user_sign_in(
        issuer=ISSUER, claims={"sub": sub, "groups": list(groups), **claims}, claim="groups", role_map=ROLE_MAP
    )


def role_groups(user) -> set[str]:
    return set(User.objects.get(pk=user.pk).groups.values_list("name", flat=True))


def test_first_sign_in_creates_a_user_with_the_mapped_roles_and_no_password():
    user = sign_in(groups=["agentsite-operators"], preferred_username="olivia", email="olivia@example.com")
    assert user.username == "olivia" and user.email == "olivia@example.com"
    assert not user.has_usable_password()
    assert role_groups(user) == {"operators"}
    assert User.objects.get(pk=user.pk).has_perm(PERM_DECIDE)
    identity = SsoIdentity.objects.get(user=user)
    assert (identity.issuer, identity.subject, identity.roles) == (ISSUER, "u-1", ["operator"])


def test_people_are_matched_by_sub_not_by_email():
    first = sign_in(sub="u-1", preferred_username="pat", email="pat@example.com")
    # The address went to someone else at the provider: a new person here, not pat.
    second = sign_in(sub="u-2", preferred_username="pat2", email="pat@example.com")
    assert second.pk != first.pk
    # pat changed address and username at the provider: still pat here (the username stays).
    again = sign_in(sub="u-1", preferred_username="patricia", email="patricia@example.com")
    assert again.pk == first.pk and again.username == "pat" and again.email == "patricia@example.com"


def test_a_local_account_with_the_same_name_or_email_is_never_taken_over():
    local = User.objects.create_superuser("admin", "root@example.com", "pw-admin-12345")
    user = sign_in(groups=["everyone"], preferred_username="admin", email="root@example.com")
    assert user.pk != local.pk and user.username == "admin-2"
    assert not user.is_superuser and role_groups(user) == {"viewers"}
    assert not SsoIdentity.objects.filter(user=local).exists()


def test_every_sign_in_sets_the_role_groups_from_the_claims_and_keeps_other_groups():
    user = sign_in(groups=["agentsite-operators", "everyone"])
    named = Group.objects.create(name="payments-approvers")  # an approval rule's named group, set by an admin
    user.groups.add(named)
    assert role_groups(user) == {"operators", "viewers", "payments-approvers"}

    user = sign_in(groups=["everyone"])
    assert role_groups(user) == {"viewers", "payments-approvers"}
    assert not User.objects.get(pk=user.pk).has_perm(PERM_DECIDE)
    assert User.objects.get(pk=user.pk).has_perm(PERM_VIEW)

    user = sign_in(groups=["agentsite-admins"])
    assert role_groups(user) == {"admins", "payments-approvers"}


def test_a_first_sign_in_without_a_mapped_role_is_refused_and_creates_nobody():
    with pytest.raises(SignInRefused, match="none of your groups"):
        sign_in(groups=["payroll"], preferred_username="carol")
    assert not User.objects.filter(username="carol").exists()
    assert not SsoIdentity.objects.exists()


def test_a_person_who_lost_every_role_is_refused_and_keeps_no_rights_in_open_sessions():
    user = sign_in(groups=["agentsite-operators"])
    with pytest.raises(SignInRefused) as refused:
        sign_in(groups=["payroll"])
    assert str(refused.value) == NO_ROLE
    assert role_groups(user) == set()
    assert not User.objects.get(pk=user.pk).has_perm(PERM_VIEW)
    assert SsoIdentity.objects.get(user=user).roles == []


def test_a_role_in_a_project_that_does_not_exist_is_refused_like_an_unmapped_group(caplog):
    """The map names a project nobody created (or one renamed since): its group gives no role, so
    the person is refused with the same sentence, created nowhere, and keeps no role they had."""
    role_map = {**ROLE_MAP, "billing-operators": "operator@billing"}

    def sign_in_to_billing(sub, groups=("billing-operators",)):
        return sso_user_sign_in(issuer=ISSUER, claims={"sub": sub, "groups": list(groups), "preferred_username": sub},
                                claim="groups", role_map=role_map)

    with pytest.raises(SignInRefused) as refused:
        sign_in_to_billing("newcomer")
    assert str(refused.value) == NO_ROLE
    assert not User.objects.filter(username="newcomer").exists() and not SsoIdentity.objects.exists()
    assert "project 'billing', which does not exist" in caplog.text

    user = sign_in_to_billing("olga", groups=["agentsite-operators"])
    with pytest.raises(SignInRefused) as refused:
        sign_in_to_billing("olga")
    assert str(refused.value) == NO_ROLE
    assert role_groups(user) == set() and not Membership.objects.filter(user=user).exists()
    assert SsoIdentity.objects.get(user=user).roles == []

    project("Billing")  # once it exists, the same group gives its role there
    user = sign_in_to_billing("olga")
    assert list(Membership.objects.filter(user=user).values_list("project__slug", "role__name")) == [
        ("billing", "operators")]


def test_a_deactivated_account_is_refused_though_the_provider_vouches():
    user = sign_in(groups=["agentsite-operators"])
    User.objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(SignInRefused, match="deactivated"):
        sign_in(groups=["agentsite-operators"])


def test_claims_without_a_subject_are_refused():
    with pytest.raises(SignInRefused, match="no sub claim"):
        sign_in(sub="")


def test_same_subject_at_another_issuer_is_another_person():
    here = sign_in(sub="u-1", preferred_username="sam")
    there = sso_user_sign_in(
        issuer="https://other-idp.example.com",
        claims={"sub": "u-1", "groups": ["everyone"], "preferred_username": "sam"},
        claim="groups",
        role_map=ROLE_MAP,
    )
    assert there.pk != here.pk and there.username == "sam-2"


# --- Names that look like someone else's -------------------------------------------------------
# A name from the provider is normalised (NFKC) and compared with every existing one by its
# skeleton (case and common Cyrillic/Greek lookalikes folded): one that looks like a name taken
# gets a number, like a name that is taken, so no two accounts here read alike.

CYRILLIC_A = "\u0430"  # а, looks like the Latin a


@pytest.mark.parametrize(
    ("wanted", "given"),
    [
        (f"{CYRILLIC_A}dmin", f"{CYRILLIC_A}dmin-2"),  # a Cyrillic а
        ("\u0410DMIN", "\u0410DMIN-2"),  # Cyrillic А, in capitals
        ("\u0391dmin", "\u0391dmin-2"),  # Greek Alpha
        ("ADMIN", "ADMIN-2"),
        ("\uff41\uff44\uff4d\uff49\uff4e", "admin-2"),  # fullwidth: NFKC makes it plain admin
        ("adm\u0456n", "adm\u0456n-2"),  # Cyrillic і
    ],
    ids=["cyrillic-a", "cyrillic-capitals", "greek-alpha", "capitals", "fullwidth", "cyrillic-i"],
)
def test_a_name_that_looks_like_an_existing_one_gets_a_number(wanted, given):
    local = User.objects.create_superuser("admin", "root@example.com", "pw-admin-12345")
    user = sign_in(preferred_username=wanted)
    assert user.pk != local.pk and user.username == given
    assert not user.is_superuser


def test_a_lookalike_of_a_numbered_name_takes_the_next_free_number():
    User.objects.create_user("admin")
    User.objects.create_user("admin-2")
    assert sign_in(sub="u-1", preferred_username=f"{CYRILLIC_A}dmin").username == f"{CYRILLIC_A}dmin-3"
    # And nobody gets a name that looks like that one either.
    assert sign_in(sub="u-2", preferred_username="admin").username == "admin-4"


def test_a_name_in_another_script_that_looks_like_nobody_is_kept_as_given():
    User.objects.create_user("ivan")
    assert sign_in(preferred_username="\u0418\u0432\u0430\u043d").username == "\u0418\u0432\u0430\u043d"  # Иван
