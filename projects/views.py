"""The projects page: the projects a person sees, their role in each, and who else works there;
site administrators make projects; a project's admins (and site administrators) add people,
change their role and remove them, and set when the nudge against quick approvals asks for a
reason. And the header's switch of the project the person works in."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from projects import access, people
from projects.current import current_project_choose, switchable_projects
from projects.forms import MemberAddForm, MemberRoleForm, NudgeSettingsForm, ProjectCreateForm, ProjectSwitchForm
from projects.models import Membership, Project

# The site's role groups (runs/roles.py) as a person is named by them: "an operator".
ROLE_NAMES = people.ROLES


def role_name(group: str) -> str:
    return ROLE_NAMES.get(group, group)


def answer_tag(project: Project) -> str:
    """The tag of a message answering a change to this project's people: shown in its card (the
    header's list skips "-answer" messages)."""
    return f"project-{project.slug}-answer"


@login_required
def project_list(request, create_form: ProjectCreateForm | None = None):
    user = request.user
    visible = access.visible_projects(user)
    projects = Project.objects.order_by("name")
    if visible is not None:
        projects = projects.filter(pk__in=visible)
    projects = list(projects)
    members: dict[int, list[Membership]] = {}
    for membership in Membership.objects.filter(project__in=projects).select_related("user", "role"):
        members.setdefault(membership.project_id, []).append(membership)
    mine = {m.project_id: role_name(m.role.name) for ms in members.values() for m in ms if m.user_id == user.pk}
    site_roles = sorted(role_name(name) for name in user.groups.filter(name__in=ROLE_NAMES).values_list("name", flat=True))
    site = ", ".join(site_roles) + " (site role)" if site_roles else "superuser" if user.is_superuser else ""
    site_admin = people.site_administrator(user)
    rows = []
    for p in projects:
        manages = site_admin or mine.get(p.pk) == ROLE_NAMES[people.ADMINS]
        rows.append({
            "project": p, "role": mine.get(p.pk) or site, "manages": manages, "answer_tag": answer_tag(p),
            "members": [{"membership": m, "name": m.user.get_username(), "role": role_name(m.role.name),
                         "form": MemberRoleForm(initial={"role": m.role.name}, auto_id=f"id_member_{m.pk}_%s")
                         if manages else None}
                        for m in members.get(p.pk, [])],
            "add_form": MemberAddForm(auto_id=f"id_{p.slug}_%s") if manages else None,
            "nudge_form": NudgeSettingsForm(instance=p, auto_id=f"id_{p.slug}_nudge_%s") if manages else None,
        })
    return render(request, "projects/project_list.html", {
        "rows": rows, "site_roles": site_roles,
        "create_form": (create_form or ProjectCreateForm(auto_id="id_new_project_%s")) if site_admin else None,
    })


@login_required
def project_create(request):
    """A new project and its first admin (site administrators only); a refused one is shown again,
    as typed, at the top of the projects page."""
    if not people.site_administrator(request.user):
        raise PermissionDenied("Only site administrators make projects.")
    if request.method != "POST":
        return redirect("project_list")
    form = ProjectCreateForm(request.POST, auto_id="id_new_project_%s")
    if form.is_valid():
        data = form.cleaned_data
        try:
            project = people.project_create(name=data["name"], slug=data["slug"], description=data["description"],
                                            admin_username=data["admin"])
        except people.PeopleRefused as refused:
            form.add_error(None, str(refused))
        else:
            admin = data["admin"].strip()
            return project_answer(request, project, f"{project} is made; {admin} is its admin and adds its people here.")
    return project_list(request, create_form=form)


@login_required
@require_POST
def project_switch(request):
    """The header's switch: the project the person works in from now on (one of theirs)."""
    form = ProjectSwitchForm(request.POST)
    wanted = form.cleaned_data["project"] if form.is_valid() else None
    project = next((p for p in switchable_projects(request.user) if p.slug == wanted), None)
    if project is None:
        raise Http404("No such project.")
    current_project_choose(request, project)
    back = form.cleaned_data.get("next") or request.headers.get("referer") or reverse("home")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        back = reverse("home")
    messages.info(request, f"You now work in {project}: new agents, rules and budgets start in it.")
    return redirect(back)


def posted_id(request, name: str) -> int | None:
    """The id a form sent as `name`; None (which names no row) when it is not one."""
    value = request.POST.get(name, "")
    return int(value) if value.isascii() and value.isdigit() and len(value) < 19 else None


def project_answer(request, project: Project, text: str, *, ok: bool = True):
    """Back to the project's card on the projects page, with `text` shown in it."""
    messages.add_message(request, messages.SUCCESS if ok else messages.ERROR, text, extra_tags=answer_tag(project))
    return redirect(f"{reverse('project_list')}#project-{project.slug}")


def form_problem(form) -> str:
    """A form's errors as one sentence to show in the card."""
    return " ".join(f"{form.fields[name].label or name.capitalize()}: {' '.join(errors)}" if name in form.fields
                    else " ".join(errors) for name, errors in form.errors.items())


@login_required
@require_POST
def member_add(request):
    project = people.project_managed(request.user, request.POST.get("project", ""))
    form = MemberAddForm(request.POST)
    if not form.is_valid():
        return project_answer(request, project, form_problem(form), ok=False)
    try:
        added = people.member_add(project=project, **form.cleaned_data)
    except people.PeopleRefused as refused:
        return project_answer(request, project, str(refused), ok=False)
    return project_answer(request, project, f"{added.user.get_username()} is now {role_name(added.role.name)} in {project}.")


@login_required
@require_POST
def member_change(request):
    """The role form of one member: its "Change" button sets the role, its "Remove" button removes them."""
    membership = Membership.objects.select_related("user", "role", "project").filter(
        pk=posted_id(request, "membership")).first()
    if membership is None:
        raise Http404("No such member.")
    project = people.project_managed(request.user, membership.project.slug)
    name = membership.user.get_username()
    try:
        if request.POST.get("action") == "remove":
            people.member_remove(membership=membership)
            return project_answer(request, project, f"{name} no longer has a role in {project}.")
        form = MemberRoleForm(request.POST)
        if not form.is_valid():
            return project_answer(request, project, form_problem(form), ok=False)
        changed = people.member_role_set(membership=membership, role=form.cleaned_data["role"])
    except people.PeopleRefused as refused:
        return project_answer(request, project, str(refused), ok=False)
    return project_answer(request, project, f"{name} is now {role_name(changed.role.name)} in {project}.")


@login_required
@require_POST
def nudge_settings(request):
    """A project's nudge thresholds, set by its admins (audited as a change of the project)."""
    project = people.project_managed(request.user, request.POST.get("project", ""))
    form = NudgeSettingsForm(request.POST, instance=project)
    if not form.is_valid():
        return project_answer(request, project, form_problem(form), ok=False)
    form.save(commit=False).save(update_fields=list(NudgeSettingsForm.Meta.fields))  # nothing else of the project
    after = project.nudge_after_quick_approvals
    text = (f"After {after} quick approval{'s' if after != 1 else ''} in a row (each within "
            f"{project.quick_approval_seconds} s), the next card in {project} asks for a reason before Approve."
            if after else f"The nudge is off in {project}: no card asks for a reason before Approve.")
    return project_answer(request, project, text)
