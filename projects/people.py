"""Who manages a project's people, and the changes they make there: adding a person with a role,
changing it, removing them. A project's admins manage their own project; site administrators
(superusers, and the site role "admins": the role group itself) manage every project and are the
only ones let into Django's admin, which is not cut by project.

The role groups are named here as the projects page names them (runs/roles.py defines their
permissions); a project role is a Membership, a site role a membership of the group itself."""
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.http import Http404

from projects import access
from projects.models import Membership, Project

ADMINS = "admins"
# The role groups a person can be given in a project, with the name the page gives each.
ROLES = {"viewers": "viewer", "operators": "operator", ADMINS: "admin"}


class PeopleRefused(Exception):
    """A change to a project's people that is not made; the message says why, to the person."""


def site_administrator(user) -> bool:
    """Superusers and people with the site role "admins" (not a project's admins)."""
    if not user.is_authenticated or not user.is_active:
        return False
    return user.is_superuser or user.groups.filter(name=ADMINS).exists()


def admin_site_entry(request) -> bool:
    """Django's admin is the site's: every project's runs, agents, tools and the audit log, none
    of it cut by project. Staff accounts of site administrators enter it; a project's admin made
    staff does not (their project's people are managed on the projects page)."""
    user = request.user
    return user.is_active and user.is_staff and site_administrator(user)


def manages_people(user, project: Project) -> bool:
    """Whether the person adds and removes this project's people and maps their chat identities."""
    if site_administrator(user):
        return True
    return user.is_authenticated and Membership.objects.filter(
        project=project, user_id=user.pk, role__name=ADMINS).exists()


def project_managed(user, slug: str) -> Project:
    """The project whose people `user` is about to change: 404 when they do not see it (another
    team's project does not exist for them), 403 when they see it without managing it."""
    project = Project.objects.filter(slug=slug).first()
    if project is None or not access.may_see(user, project.pk):
        raise Http404("No such project.")
    if not manages_people(user, project):
        raise PermissionDenied("Only this project's admins and site administrators manage its people.")
    return project


def manages_everywhere(actor, person) -> bool:
    """Whether `actor` manages every project `person` works in, and `person` has no site role: a
    chat identity acts as the person everywhere, so a project's admin maps only people whose
    every role is in projects they manage (never a site administrator's or another team's)."""
    if site_administrator(actor):
        return True
    if person.is_superuser or person.groups.exists():
        return False
    theirs = set(Membership.objects.filter(user=person).values_list("project_id", flat=True))
    managed = set(Membership.objects.filter(user_id=actor.pk, role__name=ADMINS).values_list("project_id", flat=True))
    return bool(theirs) and theirs <= managed


def _role(role: str) -> Group:
    if role not in ROLES:
        raise PeopleRefused(f"Choose a role: {', '.join(ROLES.values())}.")
    return Group.objects.get(name=role)


def _admins_lock(project_id: int) -> None:
    """The project's admins locked until the transaction ends: two admins removing each other at
    the same moment cannot leave none (the second waits, then finds the first gone)."""
    list(Membership.objects.select_for_update().filter(project_id=project_id, role__name=ADMINS).values_list("pk"))


def _keeps_an_admin(membership: Membership) -> None:
    """A project keeps at least one admin of its own, so its team can still manage it without a
    site administrator: the last one is not removed or given a lesser role."""
    if membership.role.name == ADMINS and not Membership.objects.filter(
            project_id=membership.project_id, role__name=ADMINS).exclude(pk=membership.pk).exists():
        raise PeopleRefused(f"{membership.user.get_username()} is the last admin of {membership.project}: "
                            "make someone else admin first.")


def member_add(*, project: Project, username: str, role: str) -> Membership:
    person = get_user_model().objects.filter(username=username.strip(), is_active=True).first()
    if person is None:
        raise PeopleRefused(f"No account is named “{username.strip()}”: the person signs in once (or is "
                            "added by a site administrator) before they are given a role.")
    group = _role(role)
    existing = Membership.objects.filter(project=project, user=person).select_related("role").first()
    if existing is not None:
        raise PeopleRefused(f"{person.get_username()} is already {ROLES.get(existing.role.name, existing.role.name)} "
                            "here: change their role in the list.")
    try:
        with transaction.atomic():
            return Membership.objects.create(project=project, user=person, role=group)
    except IntegrityError:  # added by someone else at the same moment
        raise PeopleRefused(f"{person.get_username()} already has a role here.") from None


def _locked(membership: Membership) -> Membership:
    """The membership read again with its project's admins locked (see _admins_lock)."""
    _admins_lock(membership.project_id)
    found = Membership.objects.select_related("role", "user", "project").filter(pk=membership.pk).first()
    if found is None:
        raise PeopleRefused(f"{membership.user.get_username()} no longer has a role here.")
    return found


def member_role_set(*, membership: Membership, role: str) -> Membership:
    group = _role(role)
    with transaction.atomic():
        membership = _locked(membership)
        if group.pk == membership.role_id:
            return membership
        if group.name != ADMINS:
            _keeps_an_admin(membership)
        membership.role = group
        membership.save()
    return membership


def member_remove(*, membership: Membership) -> None:
    with transaction.atomic():
        membership = _locked(membership)
        _keeps_an_admin(membership)
        membership.delete()


def project_create(*, name: str, slug: str, description: str, admin_username: str) -> Project:
    """A new project (by a site administrator) with its first admin, who then manages its people
    on the projects page; the name and its slug are the site's only once."""
    name, slug = name.strip(), slug.strip()
    if Project.objects.filter(name__iexact=name).exists():
        raise PeopleRefused(f"A project is already named {name}.")
    if Project.objects.filter(slug=slug).exists():
        raise PeopleRefused(f"A project already has the short name {slug}: choose another.")
    admin = get_user_model().objects.filter(username=admin_username.strip(), is_active=True).first()
    if admin is None:
        raise PeopleRefused(f"No account is named “{admin_username.strip()}”: the person signs in once before "
                            "they are made the project's admin.")
    try:
        with transaction.atomic():
            project = Project.objects.create(name=name, slug=slug, description=description.strip())
            Membership.objects.create(project=project, user=admin, role=_role(ADMINS))
    except IntegrityError:  # made by someone else at the same moment
        raise PeopleRefused(f"A project named {name} (or {slug}) was just made by someone else.") from None
    return project
