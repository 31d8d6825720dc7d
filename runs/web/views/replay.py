"""Replay one step's request against up to five models (answers only: nothing is run or added to the run;
the replay itself is recorded, and counted by the budgets covering the run)."""
from django import forms
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from runs.lifecycle.replay import MAX_MODELS, ReplayRefused, models_chosen, step_replay
from runs.models import Run, Step
from runs.roles import PERM_LAUNCH, PERM_VIEW


class ReplayForm(forms.Form):
    step = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    models = forms.CharField(
        label="Models", max_length=2000, widget=forms.Textarea(attrs={"rows": 3}),
        help_text=f"Up to {MAX_MODELS}, one a line or comma separated, asked at the run's endpoint. "
                  "Each is sent the step's request; no tool is run and nothing is added to the run.",
    )

    def clean_models(self):
        try:
            return models_chosen(self.cleaned_data["models"])
        except ReplayRefused as exc:
            raise forms.ValidationError(str(exc)) from None


@login_required
@permission_required((PERM_VIEW, PERM_LAUNCH), raise_exception=True)  # it spends tokens, as a launch does
@require_http_methods(["GET", "POST"])
def step_replay_view(request, pk: int):
    run = Run.objects.select_related("agent").filter(pk=pk).first()
    if run is None:
        raise Http404("No such run.")
    chosen = request.POST.get("step") or request.GET.get("step", "")
    step = Step.objects.filter(run=run, index=int(chosen)).first() if chosen.isascii() and chosen.isdigit() else None
    if step is None:
        raise Http404("No such step of this run.")
    answers = None
    if request.method == "POST":
        form = ReplayForm(request.POST)
        if form.is_valid():
            try:
                answers = step_replay(run=run, index=step.index, models=form.cleaned_data["models"],
                                      user=request.user).answers
            except ReplayRefused as exc:
                form.add_error(None, str(exc))
    else:
        form = ReplayForm(initial={"step": step.index, "models": "\n".join(dict.fromkeys([step.model, *run.config.get("models", [])]))})
    return render(request, "runs/step_replay.html", {"run": run, "step": step, "form": form, "answers": answers})
