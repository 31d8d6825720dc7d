"""Every route that names a thing (a run, an approval, a rule...) says which project that thing is
in, and a person outside it gets 404, as if it did not exist: one check at the URL layer, before
the view, for the pages (the middleware below) and the API (apikit/permissions.py).

Each app registers its routes' resolvers (`register`) in its AppConfig.ready; a route with an
argument and no resolver fails tests/projects/test_route_scoping.py, so a new endpoint cannot
forget its project. A resolver takes the route's keyword arguments and gives the project ids of
the things they name (None for a thing the site shares); a thing that does not exist gives
nothing, and the view answers its own 404."""
from collections.abc import Callable, Iterable

from django.http import Http404

from projects import access, current
from projects.backends import SHARED

Resolver = Callable[[dict], Iterable[int | None]]
OBJECT_ROUTES: dict[str, Resolver] = {}
# Routes whose argument is the person's own (their API tokens): each view cuts to its person.
PERSONAL_ROUTES: set[str] = set()


def register(resolvers: dict[str, Resolver]) -> None:
    OBJECT_ROUTES.update(resolvers)


def values(model, path: str, **lookup) -> Resolver:
    """A resolver reading `path` (the project's id, e.g. "agent__project_id") of the row that
    the route's argument names: `values(Run, "agent__project_id", pk="pk")`."""
    def resolve(kwargs: dict) -> list:
        try:
            filters = {field: int(kwargs[arg]) for field, arg in lookup.items()}
        except (TypeError, ValueError):
            return []  # not an id: the view answers 404 (or 400) itself
        return list(model.objects.filter(**filters).values_list(path, flat=True)[:1])
    return resolve


def both(*resolvers: Resolver) -> Resolver:
    def resolve(kwargs: dict) -> list:
        return [pk for resolver in resolvers for pk in resolver(kwargs)]
    return resolve


def scope_check(user, url_name: str | None, kwargs: dict) -> None:
    """Raise Http404 when the route names a thing of a project the person does not see; else
    set the project the request is about on the user, for has_perm."""
    resolver = OBJECT_ROUTES.get(url_name or "")
    if resolver is None or not user.is_authenticated:
        return
    if access.sees_every_project(user):
        # Every project is theirs, with one role: nothing to cut, and no query.
        return
    if not access.visible_projects(user):
        return  # no role anywhere: the view's permission check refuses them (403), as before
    found = list(resolver(kwargs))
    for project_id in found:
        if not access.may_see(user, project_id):
            raise Http404("No such page.")
    if found:
        user.project_scope = SHARED if found[0] is None else found[0]


class ProjectScopeMiddleware:
    """The pages' half of the check (the API's is in its permission class, after the token is
    read); and the project the person works in, from their session, for the page's forms
    (projects/current.py)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if getattr(view_func, "cls", None) is not None and hasattr(view_func.cls, "permission_classes"):
            return None  # a DRF view: its permission class checks, once the token is known
        current.remember(request)
        match = request.resolver_match
        scope_check(request.user, match.url_name if match else None, view_kwargs)
        return None
