"""The project a person is working in: chosen with the header's switch and kept in their session,
else their first project. Forms that ask for a project start with it, and pages name it.

Only a project the person belongs to (or, for the platform team, any project) is ever current: a
choice kept in the session is checked again on every read, so a role taken away since leaves no
trace. The middleware copies the session's choice onto the user object (no query), where the
forms, which see the user and not the request, read it."""
from projects import access
from projects.models import DEFAULT_SLUG, Project

SESSION_KEY = "current_project"
_CHOICE = "current_project_choice"  # the session's value, on the user object
_LIST = "_switchable_projects"


def remember(request) -> None:
    """Put the session's choice on the request's user (called by the pages' middleware)."""
    session = getattr(request, "session", None)
    user = getattr(request, "user", None)
    if session is None or user is None:
        return
    chosen = session.get(SESSION_KEY)
    if chosen is not None:
        setattr(user, _CHOICE, chosen)


def switchable_projects(user) -> list[Project]:
    """The projects the person may make current: theirs (every project for the platform team), by
    name; read once per request."""
    if not hasattr(user, _LIST):
        visible = access.visible_projects(user)
        projects = Project.objects.order_by("name")
        setattr(user, _LIST, list(projects if visible is None else projects.filter(pk__in=visible)))
    return getattr(user, _LIST)


def current_project(user) -> Project | None:
    """The project the person works in: their choice if they still belong to it, else their first
    project (by name; for the platform team, Default or the first of the site's); None when they
    belong to none."""
    if not getattr(user, "is_authenticated", False):
        return None
    projects = switchable_projects(user)
    chosen = getattr(user, _CHOICE, None)
    found = next((p for p in projects if p.pk == chosen), None)
    if found is None and access.visible_projects(user) is None:
        found = next((p for p in projects if p.slug == DEFAULT_SLUG), None)
    return found or (projects[0] if projects else None)


def current_project_choose(request, project: Project) -> None:
    """Make `project` current for the rest of the session (the caller checked it is theirs)."""
    request.session[SESSION_KEY] = project.pk
    for name in (_LIST, _CHOICE):
        if hasattr(request.user, name):
            delattr(request.user, name)
    setattr(request.user, _CHOICE, project.pk)
