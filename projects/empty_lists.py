"""What a form says when a list it offers is empty because the project has none of those things
yet (no agents to launch, to budget or to test): what is missing, and who can add it, by name.
A new member of a project should not meet an empty choice and then "This field is required.\""""
from projects import access
from projects.models import Membership, Project
from projects.people import ROLES


def people_who_may(project: Project, perm: str) -> list[tuple[str, str]]:
    """(username, role as the page names it) of the project's members whose role there holds
    `perm` ("runs.add_agent"), by name. The platform team (site roles) may too, unnamed here."""
    app, codename = perm.split(".", 1)
    rows = (Membership.objects.filter(project=project, role__permissions__codename=codename,
                                      role__permissions__content_type__app_label=app)
            .order_by("user__username").values_list("user__username", "role__name"))
    return [(name, ROLES.get(role, role)) for name, role in rows]


def nothing_yet_text(*, project: str, things: str, you_may: bool, people: list[tuple[str, str]]) -> str:
    """The sentence for an empty list: `things` missing in `project`, and who can add one."""
    missing = f"{project} has no {things} yet"
    if you_may:
        return f"{missing}: you may add one."
    if not people:
        return f"{missing}, and none of its people may add one: ask a site administrator."
    names = ", ".join(name for name, _ in people)
    roles = {role for _, role in people}
    if len(roles) == 1:
        role = roles.pop()
        return f"{missing}: {'an' if role[:1] in 'aeiou' else 'a'} {role} of {project} ({names}) can add one."
    return f"{missing}: {names} can add one."


def nothing_yet(*, project: Project, things: str, user, perm: str) -> str:
    return nothing_yet_text(project=project.name, things=things, you_may=access.may(user, perm, project.pk),
                            people=people_who_may(project, perm))


def missing_note(form, *, project: Project | None, user, field: str = "agent", things: str = "agents",
                 perm: str = "runs.add_agent") -> str:
    """When `project` has none of the things `form`'s `field` offers (a choice of its rows, each
    with a project), the field's help ends with what is missing and who can add one; that
    sentence ("" otherwise), for the page. Also sets the field's "required" message to it."""
    choice = form.fields[field]
    if project is None or user is None or choice.queryset.filter(project_id=project.pk).exists():
        return ""
    note = nothing_yet(project=project, things=things, user=user, perm=perm)
    choice.help_text = f"{choice.help_text} {note}".strip()
    choice.error_messages["required"] = note
    return note
