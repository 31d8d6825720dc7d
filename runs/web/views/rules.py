"""Approval rules: the list in the order they are tried, the editor with its preview and its
backtest (what people decided), deletion, and the audit trail of changes.

A save of a rule that would have approved calls people rejected goes through only once the person
confirms exactly those calls (the form's confirm_saved_over); the version records them."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.views.decorators.http import require_GET, require_POST

from projects.access import scoped, visible_projects
from runs.models import Agent, ApprovalRule
from runs.roles import PERM_DELETE_RULES, PERM_MANAGE_RULES, PERM_VIEW_RULES
from runs.supervision.rules.backtest import rule_backtest
from runs.supervision.rules.changes import SAFEGUARDS_TEXT, rule_create, rule_delete, rule_update
from runs.supervision.rules.conditions import condition_text, condition_warnings
from runs.supervision.rules.history import rule_conditions_text, rule_history, rule_list
from runs.supervision.rules.preview import PREVIEW_CALLS, draft_spec, rule_preview
from runs.supervision.rules.saved_over import (
    SavedOverUnconfirmed,
    confirmed_ids,
    decides_once_saved,
    not_yet_confirmed,
    saved_over_check,
    saved_over_needed,
)
from runs.supervision.rules.shadow_report import shadow_report
from runs.web.forms.rules import RuleForm


@login_required
@permission_required(PERM_VIEW_RULES, raise_exception=True)
@require_GET
def rule_list_view(request):
    agent = None
    projects = visible_projects(request.user)
    if request.GET.get("agent", "").isdigit():
        agent = get_object_or_404(scoped(Agent.objects.all(), request.user), pk=int(request.GET["agent"]))
    rules = [(rule, rule_conditions_text(rule)) for rule in rule_list(agent=agent, projects=projects)]
    return render(request, "runs/rule_list.html", {
        "rules": rules, "agent": agent, "history": rule_history(projects=projects), "safeguards": SAFEGUARDS_TEXT,
    })


@login_required
@permission_required(PERM_MANAGE_RULES, raise_exception=True)
def rule_create_view(request):
    return _rule_form(request, None)


@login_required
@permission_required(PERM_MANAGE_RULES, raise_exception=True)
def rule_edit_view(request, pk: int):
    return _rule_form(request, get_object_or_404(ApprovalRule, pk=pk))


@login_required
@permission_required(PERM_DELETE_RULES, raise_exception=True)
@require_POST
def rule_delete_view(request, pk: int):
    rule = get_object_or_404(ApprovalRule, pk=pk)
    rule_delete(rule=rule, user=request.user)
    messages.success(request, f"Rule {rule.name!r} deleted; its versions stay in the audit trail.")
    return redirect("rule_list")


@login_required
@permission_required(PERM_MANAGE_RULES, raise_exception=True)
@require_POST
def rule_shadow_view(request, pk: int):
    """One click: put the rule in shadow, or let it decide again. Versioned like any edit."""
    rule = get_object_or_404(ApprovalRule, pk=pk)
    shadow = request.POST.get("shadow") == "on"
    # Letting it decide again is a save that decides: what it would approve over people's
    # rejections must be confirmed by name, as in the editor and the API.
    try:
        calls = [] if shadow else saved_over_needed({"shadow": False}, rule=rule, project_id=rule.project_id)
        saved_over = saved_over_check(calls, confirmed_ids(request.POST.get("confirm_saved_over", "")))
    except SavedOverUnconfirmed as exc:
        messages.error(request, f"{exc} Untick \"In shadow\" below, press Preview, and confirm them there.")
        return redirect("rule_edit", rule.pk)
    saved = rule_update(rule=rule, data={"shadow": shadow}, user=request.user, saved_over=saved_over)
    if shadow:
        messages.success(request, f"Rule {saved.name!r} is in shadow (version {saved.version}): it records what it "
                         "would decide on every live call, and people decide as if it did not exist.")
    else:
        messages.success(request, f"Rule {saved.name!r} decides calls again (version {saved.version}).")
    if request.POST.get("next") == "edit":  # from the rule's own page: stay there
        return redirect("rule_edit", saved.pk)
    return redirect("rule_list")


def _rule_form(request, rule: ApprovalRule | None):
    initial = None
    if rule is None and request.GET.get("agent", "").isdigit():
        initial = {"agent": request.GET["agent"]}  # "Add a rule" from an agent's page
    form = RuleForm(request.POST if request.method == "POST" else None, rule=rule, initial=initial, user=request.user)
    preview = {}
    if request.method == "POST" and form.is_valid():
        data, project_id = form.rule_data(), form.chosen_project().pk
        # Preview and Save alike replay the rule as edited over what people decided (one read).
        tested = rule_backtest(draft_spec(data, rule=rule), project_id=project_id)
        calls = not_yet_confirmed(tested.rejected_over, rule) if decides_once_saved(data, rule) else []
        try:
            saved_over = None if "preview" in request.POST else saved_over_check(
                calls, form.cleaned_data["confirm_saved_over"])
        except SavedOverUnconfirmed:
            saved_over = None  # shown again with those calls, and the box that confirms them
        if saved_over is not None:
            saved = (rule_update(rule=rule, data=data, user=request.user, saved_over=saved_over) if rule
                     else rule_create(data=data, user=request.user, project=form.chosen_project(), saved_over=saved_over))
            over = f", over {len(saved_over)} call{pluralize(len(saved_over))} people rejected" if saved_over else ""
            messages.success(request, f"Rule {saved.name!r} saved (version {saved.version}{over}).")
            return redirect("rule_list")
        preview = {
            "preview": rule_preview(draft_spec(data, rule=rule), project_id=project_id),
            "preview_conditions": [condition_text(c) for c in data["conditions"]],
            "condition_warnings": condition_warnings(data["conditions"]),
            "preview_action": ApprovalRule.Action(data["action"]).label,
            "backtest": tested, "backtest_acts": decides_once_saved(data, rule), "confirm_calls": calls,
            "confirm_ids": ",".join(str(call["approval"]) for call in calls),
            "confirm_refused": "preview" not in request.POST,
        }
    if request.method == "GET" and rule is not None:
        preview["condition_warnings"] = condition_warnings(rule.conditions)
    report = shadow_report(rule.pk) if rule is not None else None
    history = rule_history(rule_key=rule.pk, limit=20) if rule else []
    return render(request, "runs/rule_form.html", {
        "form": form, "rule": rule, **preview, "preview_calls": PREVIEW_CALLS, "shadow": report,
        "safeguards": SAFEGUARDS_TEXT, "history": history,
        "saved_over_versions": [change.version for change in history if change.version.saved_over],
    })
