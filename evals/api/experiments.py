"""Experiments over the API: started, read with their scorecard (progress, pass rate,
distributions, each case's result), cancelled, and compared. Everyone who sees runs reads them;
operators start and cancel them (nothing real changes in one)."""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.reverse import reverse

from apikit.errors import Conflict
from apikit.schema import errors
from apikit.views import ApiListView, ApiView
from evals import services_projects as scope
from evals.api import serializers as api
from evals.experiments import ExperimentInvalid, baseline_for, experiment_cancel, experiment_start
from evals.models import Experiment
from evals.scorecard import compare, scorecard
from evals.scoring import experiment_catch_up
from hosting.text import MAX_SAFE_INTEGER
from runs.roles import PERM_RUN_EXPERIMENT, PERM_VIEW_EXPERIMENT


def _experiments(user):
    """The experiments of the projects the caller sees (an experiment's project is its agent's)."""
    return scope.experiments_seen(user, Experiment.objects.select_related("dataset", "agent"))


def _experiment(user, pk: int, *, catch_up: bool = False) -> Experiment:
    experiment = _experiments(user).filter(pk=pk).first()
    if experiment is None:
        raise NotFound("No such experiment.")
    if catch_up and experiment.status == Experiment.Status.RUNNING:
        experiment_catch_up(experiment)  # a case whose scoring task was lost is scored now
        experiment.refresh_from_db()
    return experiment


def _experiment_detail(experiment: Experiment) -> dict:
    card = scorecard(experiment)
    compared = baseline_for(experiment)
    experiment.compared_with = compared.pk if compared else None
    experiment.card_results = card.results
    experiment.distributions = {d.name: {"label": d.label, "count": d.count, "total": d.total, "min": d.minimum,
                                         "median": d.median, "p90": d.p90, "max": d.maximum, "mean": d.mean}
                                for d in card.distributions}
    return api.ExperimentDetailSerializer(experiment).data


DATASET_PARAMETER = OpenApiParameter("dataset", OpenApiTypes.INT, OpenApiParameter.QUERY,
                                     description="Only the experiments of this dataset.")


class ExperimentListView(ApiListView):
    required_perms = {"GET": (PERM_VIEW_EXPERIMENT,), "POST": (PERM_RUN_EXPERIMENT,)}
    serializer_class = api.ExperimentSerializer

    @extend_schema(operation_id="experiments_list", summary="Experiments, newest first",
                   parameters=[DATASET_PARAMETER], responses={200: api.ExperimentSerializer(many=True), **errors(400, 404)})
    def get(self, request):
        rows = _experiments(request.user).order_by("-pk")  # a dataset of another project: none, as for no dataset
        if "dataset" in request.query_params:
            raw = request.query_params["dataset"]
            if not raw.isdigit() or not 1 <= int(raw) <= MAX_SAFE_INTEGER:
                raise ValidationError({"dataset": ["A dataset's id."]})
            rows = rows.filter(dataset_id=int(raw))
        return self.page(rows, api.ExperimentSerializer)

    @extend_schema(
        operation_id="experiments_create",
        summary="Run every case of a dataset against a version of an agent, with nothing real changed (operators)",
        description=(
            "One run per case, through the workers: a call that would change something is simulated (answered "
            "from the case's source run when it is the same call, else told it was not executed). The version is "
            "`version` by number, the newest draft (`draft`), or else the current one; `models` and the limits "
            "change it for this experiment only. Each case is scored once its run ends."
        ),
        request=api.ExperimentCreateSerializer, responses={201: api.ExperimentDetailSerializer, **errors(400)},
        examples=[OpenApiExample("The newest draft of the demo agent", request_only=True,
                                 value={"dataset": 1, "agent": "demo", "draft": True, "max_iterations": 6})],
    )
    def post(self, request):
        body = api.ExperimentCreateSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        chosen = body.validated_data
        if not scope.may_run_experiment(request.user, chosen["dataset"]):
            raise PermissionDenied(f"You may not run experiments in project {chosen['dataset'].project.name}.")
        try:
            experiment = experiment_start(
                dataset=chosen["dataset"], agent=chosen["agent"], version=chosen.get("version"), draft=chosen["draft"],
                overrides=body.overrides(), baseline=chosen.get("baseline"), user=request.user)
        except ExperimentInvalid as exc:
            message = str(exc)
            raise ValidationError(f"{message[:1].upper()}{message[1:]}.") from exc
        headers = {"Location": reverse("api-experiment-detail", args=[experiment.pk], request=request)}
        return Response(_experiment_detail(_experiment(request.user, experiment.pk)), status=status.HTTP_201_CREATED,
                        headers=headers)


class ExperimentDetailView(ApiView):
    required_perms = {"GET": (PERM_VIEW_EXPERIMENT,)}

    @extend_schema(operation_id="experiments_retrieve",
                   summary="An experiment's scorecard: progress, pass rate, distributions and every case's result",
                   responses={200: api.ExperimentDetailSerializer, **errors(404)})
    def get(self, request, pk: int):
        return Response(_experiment_detail(_experiment(request.user, pk, catch_up=True)))


class ExperimentCancelView(ApiView):
    required_perms = {"POST": (PERM_RUN_EXPERIMENT,)}
    takes_no_body = True

    @extend_schema(operation_id="experiments_cancel",
                   summary="Cancel an experiment: its runs still going stop (operators)",
                   request=None, responses={200: api.ExperimentActionSerializer, **errors(404, 409)})
    def post(self, request, pk: int):
        experiment = _experiment(request.user, pk)
        if experiment.status != Experiment.Status.RUNNING:
            raise Conflict(f"Experiment {pk} is {experiment.get_status_display().lower()} already.")
        experiment = experiment_cancel(experiment=experiment, user=request.user)
        return Response({"detail": f"Experiment {pk} was cancelled: the cases still going stop at their next check.",
                         "experiment": api.ExperimentSerializer(experiment).data})


class ExperimentCompareView(ApiView):
    required_perms = {"GET": (PERM_VIEW_EXPERIMENT,)}

    @extend_schema(
        operation_id="experiments_compare",
        summary="This experiment against an earlier one of the same dataset: regressions first",
        description="`other_id` is the one before; each case is matched by case (by name once a case was deleted).",
        responses={200: api.ComparisonSerializer, **errors(400, 404)},
    )
    def get(self, request, pk: int, other_id: int):
        after, before = _experiment(request.user, pk, catch_up=True), _experiment(request.user, other_id, catch_up=True)
        if before.dataset_id != after.dataset_id:
            raise ValidationError(f"Experiment {after.pk} is of dataset {after.dataset.name}, experiment {before.pk} "
                                  f"of dataset {before.dataset.name}: only experiments of one dataset compare.")
        comparison = compare(before, after)
        pairs = [{
            "case": (p.after or p.before).case_id, "case_name": p.case_name, "change": p.change,
            "before_run": p.before.run_id if p.before else None, "before_passed": p.before.passed if p.before else None,
            "after_run": p.after.run_id if p.after else None, "after_passed": p.after.passed if p.after else None,
            "cost_usd_delta": p.cost_delta, "seconds_delta": p.seconds_delta,
        } for p in comparison.pairs]
        return Response(api.ComparisonSerializer({
            "before": before, "after": after,
            "counts": {change.replace(" ", "_"): comparison.count(change) for change in api.CHANGES},
            "cost_usd_delta": comparison.cost_delta, "seconds_delta": comparison.seconds_delta, "pairs": pairs,
        }).data)
