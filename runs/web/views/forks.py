"""Forking a run from one of its steps, and a fork side by side with its parent."""
from django import forms
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_safe

from runs.lifecycle.call_arguments import sensitive_fields_by_tool, shown_arguments
from runs.lifecycle.call_labels import call_label
from runs.lifecycle.forks import MESSAGE_CHARS, ForkRefused, fork_preview, run_fork
from runs.lifecycle.relatives import NotAFork, run_comparison
from runs.models import Run, Step
from runs.roles import PERM_LAUNCH, PERM_VIEW

# The one change a fork may make to the copied conversation (the service checks it against the step).
EDITS = [
    ("", "No change: the same conversation"),
    ("tool_result", "Change one tool result"),
    ("answer", "Change the model's answer of this step"),
    ("message", "Add an operator message"),
]
TEXT_LIMIT = 100_000


class ForkForm(forms.Form):
    step = forms.IntegerField(min_value=1)
    edit = forms.ChoiceField(choices=EDITS, required=False, widget=forms.RadioSelect)
    call_id = forms.CharField(required=False, max_length=1000)
    content = forms.CharField(required=False, max_length=TEXT_LIMIT, strip=False, widget=forms.Textarea)

    def clean(self):
        data = super().clean()
        if data.get("edit") == "tool_result" and not data.get("call_id"):
            self.add_error("call_id", "Choose the call whose result changes.")
        # The service refuses it too; here the error sits under the text it is about.
        if data.get("edit") == "message" and len((data.get("content") or "").strip()) > MESSAGE_CHARS:
            self.add_error("content", f"The message is longer than {MESSAGE_CHARS} characters.")
        return data

    def edit_for_service(self) -> dict | None:
        """The edit as run_fork takes it, or None for a plain copy."""
        data = self.cleaned_data
        kind, content = data["edit"], data["content"]
        if kind == "tool_result":
            return {"tool_result": {"call_id": data["call_id"], "content": content}}
        if kind == "answer":
            return {"answer": content}
        if kind == "message":
            return {"message": content}
        return None


def _steps_of(run: Run) -> list[Step]:
    # The form lists every step; the chosen one shows its answer and its calls to pick from.
    return list(run.steps.prefetch_related("tool_calls").order_by("index"))


def _calls_named(step: Step | None) -> list[dict]:
    """The step's calls, each with its label as the run page names it (from its masked arguments)."""
    calls = list(step.tool_calls.all()) if step else []
    sensitive = sensitive_fields_by_tool(c.tool_name for c in calls) if calls else {}
    return [{"call": call, "label": call_label(tool=call.tool_name, step=step.index,
                                              arguments=shown_arguments(call.arguments, sensitive.get(call.tool_name, [])))}
            for call in calls]


@login_required
@permission_required(PERM_VIEW, raise_exception=True)
@permission_required(PERM_LAUNCH, raise_exception=True)
@require_http_methods(["GET", "HEAD", "POST"])
def run_fork_view(request, pk: int):
    """GET: the form for a step (?step=n); POST: a new run from that step, then its page. A GET changes nothing."""
    run = Run.objects.select_related("agent").filter(pk=pk).first()
    if run is None:
        raise Http404("No such run.")
    steps = _steps_of(run)
    if request.method == "POST":
        form = ForkForm(request.POST)
        if form.is_valid():
            try:
                fork = run_fork(run_id=run.pk, step_index=form.cleaned_data["step"], user=request.user,
                                edit=form.edit_for_service())
            except ForkRefused as exc:
                form.add_error(None, str(exc))
            else:
                return redirect("run_detail", pk=fork.pk)
    else:
        chosen = request.GET.get("step", "")
        default = steps[-1].index if steps else 1
        form = ForkForm(initial={"step": int(chosen) if chosen.isascii() and chosen.isdigit() else default, "edit": ""})
    step_index = form["step"].value()
    chosen_step = next((s for s in steps if str(s.index) == str(step_index)), None)
    # What the fork would differ in from its parent's settings, and whether the agent still allows it.
    preview = chosen_step and fork_preview(parent=run, steps=[s for s in steps if s.index <= chosen_step.index],
                                           step_index=chosen_step.index, user=request.user)
    context = {
        "preview": preview or None,
        "run": run,
        "form": form,
        "steps": steps,
        "chosen_step": chosen_step,
        "chosen_calls": _calls_named(chosen_step),
        "chosen_answer": ((chosen_step.message or {}).get("content") or "") if chosen_step else "",
    }
    # Only a POST that created nothing gets here with a bound form: say so in the status too.
    return render(request, "runs/fork_form.html", context, status=400 if form.is_bound else 200)


@login_required
@permission_required(PERM_VIEW, raise_exception=True)
@require_safe
def run_compare(request, pk: int):
    """A fork and its parent side by side from the fork point on."""
    fork = Run.objects.select_related("forked_from").filter(pk=pk).first()
    if fork is None:
        raise Http404("No such run.")
    try:
        comparison = run_comparison(fork)
    except NotAFork as exc:
        raise Http404(str(exc))
    return render(request, "runs/run_compare.html", {
        "fork": fork, "parent": fork.forked_from, "comparison": comparison,
        "sides": [comparison["parent"], comparison["fork"]],
        "answers_differ": comparison["parent"]["answer"] != comparison["fork"]["answer"],
    })
