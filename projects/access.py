"""Who may see and do what in which project: plain functions over the person's memberships, read
once per request (cached on the user object), used by the querysets, forms and checks.

A person in a site role group (or a superuser) has that role in every project. A person with
memberships only has each membership's role in its project. An API token may be limited to one
project: its person then sees that project only, with their role there."""
from django.contrib.auth.backends import ModelBackend
from django.db.models import Q, Value

# The permission to see a project's things, for a token limited to one project.
SITE_VIEW_PERM = "runs.view_run"
_site_backend = ModelBackend()
# Where a permission comes from, in the one query that reads them: the account's own, its groups'
# (both site-wide), else the id of the project whose role gives it.
_OWN, _GROUPS = -1, -2


def _permissions_read(user) -> None:
    """The person's permissions, site-wide and per project, in one query (a UNION of their own
    permissions, their groups' and their memberships' roles'), kept on the user object where
    Django's ModelBackend keeps its own: that backend then reads none (it would take two)."""
    if hasattr(user, "_projects_all"):
        return
    from django.contrib.auth.models import Permission

    from projects.models import Membership

    names = ("content_type__app_label", "codename", "where")
    rows = (
        Permission.objects.filter(user=user).annotate(where=Value(_OWN)).order_by().values_list(*names)
        .union(Permission.objects.filter(group__user=user).annotate(where=Value(_GROUPS)).order_by().values_list(*names),
               Membership.objects.filter(user_id=user.pk).order_by().values_list(
                   "role__permissions__content_type__app_label", "role__permissions__codename", "project_id"),
               all=True)
    )
    own, groups, projects = set(), set(), {}
    for app, codename, where in rows:
        perm = f"{app}.{codename}" if codename else None
        if where == _OWN:
            own.add(perm)
        elif where == _GROUPS:
            groups.add(perm)
        else:
            found = projects.setdefault(where, set())
            if perm:
                found.add(perm)
    user._projects_all = {pk: frozenset(p) for pk, p in projects.items()}
    if not user.is_superuser and not hasattr(user, "_perm_cache"):
        # What ModelBackend would have read (a superuser's are every permission: it reads those).
        user._user_perm_cache, user._group_perm_cache = own, groups
        user._perm_cache = own | groups


def project_perms(user) -> dict[int, frozenset[str]]:
    """{project id: the permissions of the person's role there} (for a token limited to one
    project, that one only)."""
    if not user.is_active or user.is_anonymous:
        return {}
    _permissions_read(user)
    limit = getattr(user, "token_project_id", None)
    return {pk: p for pk, p in user._projects_all.items() if limit is None or pk == limit}


def site_perms(user) -> set[str]:
    """The permissions the person has in every project (their role groups; superusers all)."""
    if not user.is_active or user.is_anonymous:
        return set()
    _permissions_read(user)
    return _site_backend.get_all_permissions(user)


def sees_every_project(user) -> bool:
    if not user.is_authenticated or not user.is_active:
        return False
    if getattr(user, "token_project_id", None) is not None:
        return False
    # Any permission held site-wide (a role group, or one given to the account) holds in every
    # project: such a person is of the platform team, and sees them all.
    return user.is_superuser or bool(site_perms(user))


def projects_with(user, perm: str) -> set[int] | None:
    """The projects where the person has `perm`; None when that is every project."""
    if not user.is_authenticated or not user.is_active:
        return set()
    limit = getattr(user, "token_project_id", None)
    if user.is_superuser or perm in site_perms(user):
        return None if limit is None else {limit}
    return {pk for pk, perms in project_perms(user).items() if perm in perms}


def visible_projects(user) -> set[int] | None:
    """The projects whose things the person sees; None when that is every project."""
    if sees_every_project(user):
        return None
    return projects_with(user, SITE_VIEW_PERM) if getattr(user, "token_project_id", None) is not None \
        else set(project_perms(user))


def may_see(user, project_id: int | None) -> bool:
    """Whether the person sees a thing of this project (None: a thing the site shares)."""
    visible = visible_projects(user)
    if project_id is None:
        return visible is None or bool(visible)
    return visible is None or project_id in visible


def token_limited(user) -> bool:
    """Whether the request comes with an API token limited to one project."""
    return getattr(user, "token_project_id", None) is not None


def may(user, perm: str, project_id: int | None) -> bool:
    """Whether the person has `perm` in this project; a thing the site shares (None) is changed
    by site roles only, and never through a token limited to a project (it acts in that project
    only, as a member of it would)."""
    if project_id is None:
        return not token_limited(user) and (user.is_superuser or perm in site_perms(user))
    allowed = projects_with(user, perm)
    return allowed is None or project_id in allowed


def scoped(queryset, user, field: str = "project", shared: bool = False):
    """The queryset cut to the projects the person sees; `field` leads to the project (for runs
    "agent__project"); with `shared`, rows of no project (shared by the site) stay."""
    visible = visible_projects(user)
    if visible is None:
        return queryset
    wanted = Q(**{f"{field}__in": visible})
    if shared:
        wanted |= Q(**{f"{field}__isnull": True})
    return queryset.filter(wanted)
