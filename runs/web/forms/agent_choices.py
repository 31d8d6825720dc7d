"""An agent choice that may come out empty for a project: its help says so, and who can add one
(projects/empty_lists.py), so the person does not meet an empty list without a word."""
from projects.empty_lists import nothing_yet
from runs.roles import PERM_ADD_AGENT


def agents_missing_note(form, *, field: str = "agent", project, user) -> str:
    """When `project` has none of the agents the field offers, its help text ends with what is
    missing and who can add one; that sentence ("" otherwise), for the page."""
    if project is None or user is None or form.fields[field].queryset.filter(project_id=project.pk).exists():
        return ""
    note = nothing_yet(project=project, things="agents", user=user, perm=PERM_ADD_AGENT)
    help_text = form.fields[field].help_text
    form.fields[field].help_text = f"{help_text} {note}".strip()
    return note
