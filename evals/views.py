"""Datasets, cases and experiments in the dashboard: thin views over evals' services.

Everyone who sees runs reads datasets and experiments; operators add cases and run experiments
(nothing real changes in one); admins delete datasets."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from evals import datasets as data
from evals import services_projects as scope
from evals.experiments import ExperimentInvalid, baseline_for, experiment_cancel, experiment_start
from evals.forms import CaseForm, CaseFromRunForm, DatasetForm, ExperimentForm, ImportForm
from evals.models import Case, Dataset, Experiment
from evals.prefill import case_from_run
from evals.scorecard import compare, scorecard
from evals.scoring import experiment_catch_up
from projects.empty_lists import missing_note
from runs.lifecycle.relatives import runs_side_by_side
from runs.models import Run, Step
from runs.roles import (
    PERM_ADD_DATASET,
    PERM_CHANGE_DATASET,
    PERM_DELETE_DATASET,
    PERM_RUN_EXPERIMENT,
    PERM_VIEW,
    PERM_VIEW_DATASET,
    PERM_VIEW_EXPERIMENT,
)

MAX_IMPORT_BYTES = 10 * 1024 * 1024


@login_required
@permission_required(PERM_VIEW_DATASET, raise_exception=True)
def dataset_list(request):
    form = DatasetForm(request.POST if request.method == "POST" else None, user=request.user)
    if request.method == "POST":
        _need(request, PERM_ADD_DATASET)
        if form.is_valid():
            try:
                dataset = scope.dataset_create(**form.cleaned_data, user=request.user)
            except data.CaseInvalid as invalid:
                _errors_to_form(form, invalid)
            else:
                messages.success(request, f"Dataset {dataset.name} made: add cases from runs or by hand.")
                return redirect("dataset_detail", pk=dataset.pk)
    rows = list(scope.datasets_seen(request.user).order_by("name"))
    last = scope.experiments_seen(request.user).in_bulk([d.last_experiment_id for d in rows if d.last_experiment_id])
    for dataset in rows:
        dataset.last_experiment = last.get(dataset.last_experiment_id)
    return render(request, "evals/dataset_list.html", {"datasets": rows, "form": form})


@login_required
@permission_required(PERM_VIEW_DATASET, raise_exception=True)
def dataset_detail(request, pk: int):
    dataset = get_object_or_404(Dataset.objects.select_related("project"), pk=pk)
    case_form = CaseForm(prefix="case")
    agents = scope.agents_for(dataset)  # an experiment runs an agent of the dataset's project
    experiment_form = ExperimentForm(prefix="experiment", agents=agents)
    # A project with no agent yet: the agent field says so and who can add one.
    experiment_form.agents_missing = missing_note(experiment_form, project=dataset.project, user=request.user)
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "case":
            _need(request, PERM_CHANGE_DATASET)
            case_form = CaseForm(request.POST, prefix="case")
            if case_form.is_valid():
                try:
                    case = data.case_add(dataset=dataset, data=case_form.cleaned_data, user=request.user)
                except data.CaseInvalid as invalid:
                    _errors_to_form(case_form, invalid)
                else:
                    messages.success(request, f"Case {case.name!r} added.")
                    return redirect("dataset_detail", pk=dataset.pk)
        elif action == "experiment":
            _need(request, PERM_RUN_EXPERIMENT)
            experiment_form = ExperimentForm(request.POST, prefix="experiment", agents=agents)
            experiment_form.agents_missing = missing_note(experiment_form, project=dataset.project, user=request.user)
            if experiment_form.is_valid():
                chosen = experiment_form.cleaned_data
                models = experiment_form.model_list()
                try:
                    experiment = experiment_start(
                        dataset=dataset, agent=chosen["agent"], draft=chosen["which"] == "draft",
                        version=chosen["version"] if chosen["which"] == "number" else None,
                        overrides={"models": models} if models else {}, user=request.user)
                except ExperimentInvalid as invalid:
                    experiment_form.add_error(None, str(invalid).capitalize() + ".")
                else:
                    return redirect("experiment_detail", pk=experiment.pk)
        else:
            raise Http404("No such action.")
    return render(request, "evals/dataset_detail.html", {
        "dataset": dataset,
        "cases": list(dataset.cases.order_by("pk")),
        "experiments": list(scope.experiments_seen(request.user, dataset.experiments.select_related("agent"))
                            .order_by("-pk")[:50]),
        "case_form": case_form, "experiment_form": experiment_form, "import_form": ImportForm(),
    })


@login_required
@permission_required(PERM_CHANGE_DATASET, raise_exception=True)
def case_edit(request, dataset_id: int, pk: int):
    case = get_object_or_404(Case.objects.select_related("dataset"), pk=pk, dataset_id=dataset_id)
    initial = {"name": case.name, "task": case.task, "customer": case.customer, "expectations": case.expectations}
    form = CaseForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and request.POST.get("action") == "delete":
        case.delete()
        messages.success(request, f"Case {case.name!r} deleted (the results of experiments keep its name).")
        return redirect("dataset_detail", pk=dataset_id)
    if request.method == "POST" and form.is_valid():
        try:
            data.case_update(case=case, data=form.cleaned_data)
        except data.CaseInvalid as invalid:
            _errors_to_form(form, invalid)
        else:
            messages.success(request, f"Case {case.name!r} saved.")
            return redirect("dataset_detail", pk=dataset_id)
    return render(request, "evals/case_edit.html", {"case": case, "dataset": case.dataset, "form": form})


@login_required
@permission_required((PERM_CHANGE_DATASET, PERM_VIEW), raise_exception=True)
def run_add_to_dataset(request, pk: int):
    """From a run (or a step of it): a case with its task, customer, conversation and prefilled checks."""
    run = get_object_or_404(Run.objects.select_related("agent__project"), pk=pk)
    datasets = scope.datasets_for(run)  # a case goes to a dataset of the run's project
    steps = Step.objects.filter(run=run, kind=Step.Kind.TURN).count()
    step = _int(request.POST.get("step") if request.method == "POST" else request.GET.get("step"))
    step = step if step and 2 <= step <= steps else None
    if request.method == "POST":
        form = CaseFromRunForm(request.POST, steps=steps, datasets=datasets)
        if form.is_valid():
            chosen = form.cleaned_data
            case = case_from_run(run, step=chosen["step"], with_conversation=chosen["with_conversation"])
            case["expectations"] = chosen["expectations"]
            if chosen["name"].strip():
                case["name"] = chosen["name"].strip()
            try:
                with transaction.atomic():
                    dataset = chosen["dataset"]
                    if dataset is None:
                        _need(request, PERM_ADD_DATASET)
                        dataset = scope.dataset_create(project=run.agent.project, name=chosen["new_dataset"],
                                                       user=request.user)
                    added = data.case_add(dataset=dataset, data=case, user=request.user)
            except data.CaseInvalid as invalid:
                _errors_to_form(form, invalid, rename={"name": "new_dataset", "project": "new_dataset"}
                                if chosen["dataset"] is None else None)
            else:
                messages.success(request, f"Case {added.name!r} added to dataset {dataset.name}.")
                return redirect("dataset_detail", pk=dataset.pk)
    else:
        prefilled = case_from_run(run, step=step)
        form = CaseFromRunForm(steps=steps, datasets=datasets, initial={
            "step": step, "expectations": prefilled["expectations"], "name": prefilled["name"],
            "dataset": datasets.order_by("-updated_at").first()})
    return render(request, "evals/add_to_dataset.html", {"run": run, "form": form, "steps": steps,
                                                         "project": run.agent.project})


@login_required
@permission_required(PERM_CHANGE_DATASET, raise_exception=True)
@require_POST
def dataset_import(request, pk: int):
    dataset = get_object_or_404(Dataset, pk=pk)
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose a JSONL file to import.")
        return redirect("dataset_detail", pk=pk)
    upload = form.cleaned_data["file"]
    if upload.size > MAX_IMPORT_BYTES:
        messages.error(request, f"The file is larger than {MAX_IMPORT_BYTES // (1024 * 1024)} MB.")
        return redirect("dataset_detail", pk=pk)
    try:
        text = upload.read().decode("utf-8")
        # A source run of another project (or not seen) is left out, as one that no longer exists.
        text = scope.import_text_scoped(request.user, dataset, text)
        added = data.cases_import(dataset=dataset, text=text, user=request.user)
    except UnicodeDecodeError:
        messages.error(request, "The file is not UTF-8 text.")
    except data.CaseInvalid as invalid:
        problems = [m for ms in invalid.errors.values() for m in ms]
        shown = "; ".join(problems[:10]) + (f" (and {len(problems) - 10} more)" if len(problems) > 10 else "")
        messages.error(request, f"Nothing was imported: {shown}")
    else:
        messages.success(request, f"{len(added)} case{'s' if len(added) != 1 else ''} imported.")
    return redirect("dataset_detail", pk=pk)


@login_required
@permission_required(PERM_VIEW_DATASET, raise_exception=True)
@require_GET
def dataset_export(request, pk: int):
    dataset = get_object_or_404(Dataset, pk=pk)
    response = StreamingHttpResponse(data.cases_export(dataset), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="dataset-{dataset.pk}.jsonl"'
    return response


@login_required
@permission_required(PERM_DELETE_DATASET, raise_exception=True)
@require_POST
def dataset_delete(request, pk: int):
    dataset = get_object_or_404(Dataset, pk=pk)
    if dataset.experiments.exists():
        messages.error(request, f"Dataset {dataset.name} has experiments: their scorecards need it, so it stays.")
        return redirect("dataset_detail", pk=pk)
    dataset.delete()
    messages.success(request, f"Dataset {dataset.name} deleted.")
    return redirect("dataset_list")


def _experiment_for_page(pk: int) -> Experiment:
    experiment = get_object_or_404(Experiment.objects.select_related("dataset", "agent", "baseline"), pk=pk)
    if experiment.status == Experiment.Status.RUNNING:
        experiment_catch_up(experiment)  # a case whose scoring task was lost is scored now
        experiment.refresh_from_db()
    return experiment


@login_required
@permission_required(PERM_VIEW_EXPERIMENT, raise_exception=True)
@require_GET
def experiment_detail(request, pk: int):
    experiment = _experiment_for_page(pk)
    card = scorecard(experiment)
    baseline = baseline_for(experiment)
    return render(request, "evals/experiment_detail.html", {
        "experiment": experiment, "card": card, "baseline": baseline,
        "earlier": list(scope.experiments_seen(request.user).filter(dataset=experiment.dataset).exclude(pk=pk)
                        .order_by("-pk")[:20]),
    })


@login_required
@permission_required(PERM_VIEW_EXPERIMENT, raise_exception=True)
@require_GET
def experiment_progress(request, pk: int):
    """What the experiment page polls while it runs: cases done of total, failing so far."""
    experiment = _experiment_for_page(pk)
    return JsonResponse({
        "status": experiment.status, "cases_total": experiment.cases_total, "cases_done": experiment.cases_done,
        "cases_passed": experiment.cases_passed, "cases_failed": experiment.cases_failed,
    })


@login_required
@permission_required(PERM_RUN_EXPERIMENT, raise_exception=True)
@require_POST
def experiment_cancel_view(request, pk: int):
    experiment = get_object_or_404(Experiment, pk=pk)
    experiment_cancel(experiment=experiment, user=request.user)
    messages.success(request, f"Experiment {experiment.pk} cancelled: the cases still going stop at their next check.")
    return redirect("experiment_detail", pk=pk)


@login_required
@permission_required(PERM_VIEW_EXPERIMENT, raise_exception=True)
@require_GET
def experiment_compare(request, pk: int, other: int):
    after = _experiment_for_page(pk)
    before = _experiment_for_page(other)
    if before.dataset_id != after.dataset_id:
        raise Http404("These experiments are of different datasets.")
    return render(request, "evals/experiment_compare.html", {"comparison": compare(before, after),
                                                             "before": before, "after": after})


@login_required
@permission_required((PERM_VIEW_EXPERIMENT, PERM_VIEW), raise_exception=True)
@require_GET
def case_compare(request, pk: int, other: int, case_id: int):
    """One case's two runs (in experiment `other`, then in `pk`) side by side."""
    after, before = get_object_or_404(Experiment, pk=pk), get_object_or_404(Experiment, pk=other)
    pair = next((p for p in compare(before, after).pairs
                 if (p.after or p.before).case_id == case_id), None)
    if pair is None or not (pair.before and pair.after and pair.before.run and pair.after.run):
        raise Http404("This case has no run in one of the two experiments.")
    sides = runs_side_by_side(pair.before.run, pair.after.run)
    return render(request, "evals/case_compare.html", {
        "pair": pair, "before": before, "after": after, "sides": sides, "left": sides["left"], "right": sides["right"],
        "pair_sides": [sides["left"], sides["right"]], "answers_differ": sides["left"]["answer"] != sides["right"]["answer"],
    })


def _need(request, perm: str) -> None:
    if not request.user.has_perm(perm):
        raise PermissionDenied


def _errors_to_form(form, invalid: data.CaseInvalid, rename: dict | None = None) -> None:
    for field, problems in invalid.errors.items():
        field = (rename or {}).get(field, field)
        for problem in problems:
            form.add_error(field if field in form.fields else None, problem)


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
