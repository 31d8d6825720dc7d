"""Chat identities mapped on the projects page: which Slack member acts as which account when they
click Approve or Reject in a channel. A project's admins map the people of their project (see
projects.people.manages_everywhere: an identity acts as its person in every project, so only
people whose every role is in projects the admin manages); site administrators map anyone.
Nobody maps their own account."""
import re

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from accounts.models import ChatIdentity
from projects.models import Membership, Project
from projects.people import PeopleRefused, manages_everywhere

# Slack member ids: U (or W, in Enterprise Grid) and capitals and digits, e.g. U024BE7LH.
MEMBER_ID = re.compile(r"[UW][A-Z0-9]{2,63}")
MEMBER_ID_HELP = "A Slack member ID looks like U024BE7LH (in Slack: the person's profile → ⋮ → Copy member ID)."


def chat_identities_of(project: Project) -> list[ChatIdentity]:
    """The chat identities of the project's people."""
    return list(ChatIdentity.objects.filter(user__memberships__project=project).select_related("user")
                .order_by("user__username", "member_id"))


def _mappable(actor, project: Project, person) -> None:
    if not Membership.objects.filter(project=project, user=person).exists():
        raise PeopleRefused(f"{person.get_username()} has no role in {project}: add them to it first.")
    if not manages_everywhere(actor, person):
        raise PeopleRefused(f"{person.get_username()} also works where you are no admin (another project, or a site "
                            "role): a site administrator maps their chat identity.")


def chat_identity_map(*, actor, project: Project, username: str, member_id: str) -> ChatIdentity:
    member_id = member_id.strip().upper()
    if not MEMBER_ID.fullmatch(member_id):
        raise PeopleRefused(MEMBER_ID_HELP)
    person = get_user_model().objects.filter(username=username.strip()).first()
    if person is None:
        raise PeopleRefused(f"No account is named “{username.strip()}”.")
    if person.pk == actor.pk:
        # A mapping is an administrator's word that this Slack member is this person, never a claim.
        raise PeopleRefused("Nobody maps their own chat identity: another admin of the project or a site "
                            "administrator does.")
    _mappable(actor, project, person)
    taken = ChatIdentity.objects.filter(member_id=member_id).select_related("user").first()
    if taken is not None:
        if taken.user_id == person.pk:
            raise PeopleRefused(f"{member_id} already acts as {person.get_username()}.")
        # Whose it is only when that person is of this project: another team's people are not named.
        whose = taken.user.get_username() if Membership.objects.filter(project=project, user=taken.user).exists() \
            else "another account"
        raise PeopleRefused(f"{member_id} already acts as {whose}: remove that first.")
    try:
        with transaction.atomic():
            return ChatIdentity.objects.create(user=person, member_id=member_id)
    except IntegrityError:  # mapped by someone else at the same moment
        raise PeopleRefused(f"{member_id} was just mapped to another account.") from None


def chat_identity_unmap(*, actor, project: Project, identity: ChatIdentity) -> None:
    _mappable(actor, project, identity.user)
    identity.delete()
