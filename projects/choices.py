"""Which project a new thing may go into, for the forms and the API: the projects where the
person has the permission to add it, and the one chosen when they do not say; and the people a
project's rule or budget may name (who launches its runs)."""
from django.contrib.auth import get_user_model
from django.db.models import Q

from projects import access
from projects.current import current_project
from projects.models import DEFAULT_SLUG, Membership, Project

NO_PROJECT = "You have no project where you may add this: ask an administrator for a role in one."


def project_choices(user, perm: str):
    """The projects where `user` has `perm`, by name."""
    allowed = access.projects_with(user, perm)
    projects = Project.objects.order_by("name")
    return projects if allowed is None else projects.filter(pk__in=allowed)


def project_default(user, perm: str) -> Project | None:
    """The project a new thing goes into when the person names none: their only project where
    they have `perm`, else Default if that is one of them; None when they must choose."""
    choices = list(project_choices(user, perm)[:2])
    if len(choices) == 1:
        return choices[0]
    default = project_choices(user, perm).filter(slug=DEFAULT_SLUG).first()
    if default is None and access.projects_with(user, perm) is None:
        default, _ = Project.objects.get_or_create(slug=DEFAULT_SLUG, defaults={"name": "Default"})
    return default


def project_initial(user, perm: str) -> Project | None:
    """The project a form starts with: the one the person works in (the header's switch) when
    they may add this there, else their default."""
    current = current_project(user)
    if current is not None and access.may(user, perm, current.pk):
        return current
    return project_default(user, perm)


def project_problem(user, perm: str, project: Project | None) -> str:
    """Why `user` may not put a new thing into `project` ("" when they may)."""
    if project is None:
        return NO_PROJECT if not project_choices(user, perm).exists() else "Choose a project."
    if not access.may(user, perm, project.pk):
        # Another project's name: as if it did not exist, unless the person sees it.
        if not access.may_see(user, project.pk):
            return f"No project {project.slug!r}."
        return f"You may not add this to {project.name}: your role there does not allow it."
    return ""


def project_field_prepare(form, user, perm: str) -> None:
    """A form's `project` field for a new thing: the projects where `user` has `perm`, the one
    they work in chosen first; left out of a post (a script, an older form), that one."""
    field = form.fields["project"]
    field.queryset = project_choices(user, perm)
    field.required = False
    field.empty_label = None
    form.project_fallback = field.initial = project_initial(user, perm)
    if form.initial.get("project") is None and field.initial is not None:
        # A ModelForm's new instance gives "project": None, which a field's initial does not beat.
        form.initial["project"] = field.initial.pk


def project_field_clean(form, cleaned: dict, user, perm: str) -> None:
    """In the form's clean(): the project named, or the person's default; an error in words when
    there is none they may use."""
    if "project" not in form.fields:
        return
    project = cleaned.get("project") or getattr(form, "project_fallback", None)
    problem = project_problem(user, perm, project)
    if problem:
        form.add_error("project", problem)
    else:
        cleaned["project"] = project


def people_of(projects: set[int] | None, queryset=None):
    """The accounts of `queryset` (every account by default) who launch runs in `projects`
    (None: every project): the projects' members, and the platform team (a site role, or a
    superuser, holds in every project). What a rule's "launched by" and a budget's person may
    name: another team's people are not offered, and named are answered as no such account."""
    people = queryset if queryset is not None else get_user_model().objects.all()
    if projects is None:
        return people
    User = get_user_model()
    return people.filter(
        Q(pk__in=Membership.objects.filter(project_id__in=projects).values("user_id"))
        | Q(is_superuser=True)
        | Q(pk__in=User.groups.through.objects.filter(group__permissions__isnull=False).values("user_id"))
        | Q(pk__in=User.user_permissions.through.objects.values("user_id"))
    )
