"""The Supervision page: how people decide a project's destructive calls (runs/supervision/
quality/report.py). A project's operators and admins (those who decide its calls) read
everyone's figures there; anyone signed in reads their own, in the projects they see."""
from django import forms
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from hosting.replica import reads_from_replica
from projects.access import may, visible_projects
from projects.models import Project
from projects.people import manages_people
from runs.roles import PERM_DECIDE
from runs.supervision.quality import report as quality

EVERYONE, ME = "everyone", "me"


class SupervisionForm(forms.Form):
    project = forms.SlugField(required=False)
    whose = forms.ChoiceField(choices=[(EVERYONE, "Everyone in the project"), (ME, "Just me")], required=False)
    days = forms.TypedChoiceField(choices=[(d, f"Last {d} days") for d in quality.PERIODS], coerce=int,
                                  required=False, empty_value=quality.DEFAULT_DAYS)


def projects_seen(user) -> list[Project]:
    visible = visible_projects(user)
    projects = Project.objects.order_by("name")
    return list(projects if visible is None else projects.filter(pk__in=visible))


def project_chosen(user, projects: list[Project], slug: str) -> Project | None:
    """The project named (one the person sees), else their first where they decide, else their first."""
    named = next((p for p in projects if p.slug == slug), None)
    if named is not None:
        return named
    return next((p for p in projects if may(user, PERM_DECIDE, p.pk)), projects[0] if projects else None)


@login_required
@require_GET
@reads_from_replica  # figures a moment stale are fine (hosting/replica.py)
def supervision(request):
    user = request.user
    form = SupervisionForm(request.GET)
    data = form.cleaned_data if form.is_valid() else {}
    projects = projects_seen(user)
    project = project_chosen(user, projects, data.get("project") or "")
    context = {"form": form, "projects": projects, "project": project, "periods": quality.PERIODS}
    if project is None:
        return render(request, "runs/supervision.html", context)
    decides = may(user, PERM_DECIDE, project.pk)
    whose = data.get("whose") or (EVERYONE if decides else ME)
    if whose == EVERYONE and not decides:
        whose, context["only_yours"] = ME, True
    days = data.get("days") or quality.DEFAULT_DAYS
    scope = quality.scope_of(project_id=project.pk, person_id=user.pk if whose == ME else None, days=days)
    report = quality.quality_report(scope, people=whose == EVERYONE)
    context.update({
        "whose": whose, "decides": decides, "days": days, "scope": scope, "manages": manages_people(user, project),
        "f": report.figures, "people": report.people, "series": quality.series_charts(report),
        "waits": quality.longest_waits(scope), "contradicted": quality.contradicted_calls(scope),
        "why_words": quality.WHY_WORDS,
    })
    return render(request, "runs/supervision.html", context)
