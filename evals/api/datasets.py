"""Datasets and their cases over the API, JSONL export and import included: thin views over
evals.datasets, like the dashboard's. Everyone who sees runs reads them; operators add and change
cases; admins delete datasets."""
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ParseError, ValidationError
from rest_framework.parsers import BaseParser
from rest_framework.response import Response
from rest_framework.reverse import reverse

from apikit.errors import Conflict, RequestTooLarge, size_in_words
from apikit.fields import service_errors
from apikit.negotiation import IgnoreAcceptHeader
from apikit.parsers import BoundedJSONParser
from apikit.schema import errors
from apikit.views import ApiListView, ApiView
from evals import datasets as services
from evals import services_projects as scope
from evals.api import serializers as api
from evals.models import Case, Dataset
from evals.prefill import case_from_run
from hosting.text import MAX_SAFE_INTEGER, JsonTooDeep, loads
from runs.engine.storage.text import check_storable_json
from runs.lifecycle.forks import MAX_STEP
from runs.models import Step
from runs.roles import (
    PERM_ADD_DATASET,
    PERM_CHANGE_DATASET,
    PERM_DELETE_DATASET,
    PERM_VIEW,
    PERM_VIEW_DATASET,
)

NDJSON = "application/x-ndjson"


def _datasets(user):
    """The datasets of the projects the caller sees (the routes answer 404 for another's already)."""
    return scope.datasets_seen(user)


def _dataset(user, pk: int) -> Dataset:
    dataset = _datasets(user).filter(pk=pk).first()
    if dataset is None:
        raise NotFound("No such dataset.")
    return dataset


def _case(user, dataset_id: int, pk: int) -> Case:
    case = Case.objects.select_related("created_by").filter(dataset_id=_dataset(user, dataset_id).pk, pk=pk).first()
    if case is None:
        raise NotFound("No such case in this dataset.")
    return case


def _invalid(exc: services.CaseInvalid, rename: dict | None = None) -> ValidationError:
    return service_errors({(rename or {}).get(field, field): messages for field, messages in exc.errors.items()})


def _dataset_answer(user, pk: int, code: int = 200) -> Response:
    return Response(api.DatasetSerializer(_dataset(user, pk)).data, status=code)


# --- Datasets ---------------------------------------------------------------------------------------


class DatasetListView(ApiListView):
    required_perms = {"GET": (PERM_VIEW_DATASET,), "POST": (PERM_ADD_DATASET,)}
    serializer_class = api.DatasetSerializer

    @extend_schema(operation_id="datasets_list", summary="Datasets by name, with how many cases and experiments",
                   responses={200: api.DatasetSerializer(many=True), **errors(404)})
    def get(self, request):
        return self.page(_datasets(request.user).order_by("name"), api.DatasetSerializer)

    @extend_schema(operation_id="datasets_create", summary="Create a dataset (operators)",
                   request=api.DatasetSerializer, responses={201: api.DatasetSerializer, **errors(400)},
                   examples=[OpenApiExample("Weather questions", request_only=True,
                                            value={"name": "weather", "project": "support",
                                                   "description": "Cities, one or two."})])
    def post(self, request):
        body = api.DatasetSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        values = dict(body.validated_data)
        try:
            dataset = scope.dataset_create(project=values.pop("project", None), **values, user=request.user)
        except services.CaseInvalid as exc:
            raise _invalid(exc) from exc
        headers = {"Location": reverse("api-dataset-detail", args=[dataset.pk], request=request)}
        return Response(api.DatasetSerializer(_dataset(request.user, dataset.pk)).data,
                        status=status.HTTP_201_CREATED, headers=headers)


class DatasetDetailView(ApiView):
    required_perms = {"GET": (PERM_VIEW_DATASET,), "PATCH": (PERM_CHANGE_DATASET,), "DELETE": (PERM_DELETE_DATASET,)}

    @extend_schema(operation_id="datasets_retrieve", summary="One dataset",
                   responses={200: api.DatasetSerializer, **errors(404)})
    def get(self, request, pk: int):
        return _dataset_answer(request.user, pk)

    @extend_schema(operation_id="datasets_partial_update", summary="Rename a dataset or change its description (operators)",
                   request=api.DatasetSerializer(partial=True), responses={200: api.DatasetSerializer, **errors(400, 404)})
    def patch(self, request, pk: int):
        dataset = _dataset(request.user, pk)
        body = api.DatasetSerializer(dataset, data=request.data, partial=True, context={"request": request})
        body.is_valid(raise_exception=True)
        values = body.validated_data
        if "name" in values:
            if Dataset.objects.filter(name=values["name"]).exclude(pk=dataset.pk).exists():
                raise ValidationError({"name": [f"A dataset named {values['name']!r} exists already."]})
        for field, value in values.items():
            setattr(dataset, field, value)
        try:
            with transaction.atomic():
                dataset.save(update_fields=[*values, "updated_at"])
        except IntegrityError as exc:  # renamed meanwhile to the same name by someone else
            raise ValidationError({"name": [f"A dataset named {dataset.name!r} exists already."]}) from exc
        return _dataset_answer(request.user, pk)

    @extend_schema(operation_id="datasets_destroy",
                   summary="Delete a dataset and its cases (admins); refused while experiments need it",
                   responses={204: None, **errors(404, 409)})
    def delete(self, request, pk: int):
        dataset = _dataset(request.user, pk)
        count = dataset.experiment_count
        if count:
            raise Conflict(_kept(dataset, "an experiment, whose scorecard needs" if count == 1 else
                                 f"{count} experiments, whose scorecards need"))
        try:
            dataset.delete()
        except ProtectedError as exc:  # an experiment started meanwhile
            raise Conflict(_kept(dataset, "experiments now, whose scorecards need")) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


def _kept(dataset: Dataset, what: str) -> str:
    return f"Dataset {dataset.name} has {what} it: it cannot be deleted."


# --- Cases ------------------------------------------------------------------------------------------


class CaseListView(ApiListView):
    required_perms = {"GET": (PERM_VIEW_DATASET,), "POST": (PERM_CHANGE_DATASET,)}
    serializer_class = api.CaseSerializer

    @extend_schema(operation_id="datasets_cases_list", summary="A dataset's cases, oldest first",
                   responses={200: api.CaseSerializer(many=True), **errors(404)})
    def get(self, request, dataset_id: int):
        dataset = _dataset(request.user, dataset_id)
        return self.page(dataset.cases.select_related("created_by").order_by("pk"), api.CaseSerializer)

    @extend_schema(
        operation_id="datasets_cases_create", summary="Add a case written by hand (operators)",
        request=api.CaseSerializer, responses={201: api.CaseSerializer, **errors(400, 404)},
        examples=[OpenApiExample("The weather in two cities", request_only=True, value={
            "task": "What's the weather in Lagos and London?",
            "expectations": [{"kind": "tool_called", "tool": "get_weather",
                              "conditions": [{"path": "$.city", "op": "eq", "value": "Lagos"}]},
                             {"kind": "stop_reason", "in": ["final_answer"]}]})],
    )
    def post(self, request, dataset_id: int):
        dataset = _dataset(request.user, dataset_id)
        body = api.CaseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            scope.source_run_check(request.user, dataset, body.service_data())
            case = services.case_add(dataset=dataset, data=body.service_data(), user=request.user)
        except services.CaseInvalid as exc:
            raise _invalid(exc) from exc
        return _case_created(request, case)


def _case_created(request, case: Case) -> Response:
    headers = {"Location": reverse("api-case-detail", args=[case.dataset_id, case.pk], request=request)}
    return Response(api.CaseSerializer(case).data, status=status.HTTP_201_CREATED, headers=headers)


class CaseDetailView(ApiView):
    required_perms = {"GET": (PERM_VIEW_DATASET,), "PATCH": (PERM_CHANGE_DATASET,), "DELETE": (PERM_CHANGE_DATASET,)}

    @extend_schema(operation_id="datasets_cases_retrieve", summary="One case of a dataset",
                   responses={200: api.CaseSerializer, **errors(404)})
    def get(self, request, dataset_id: int, pk: int):
        return Response(api.CaseSerializer(_case(request.user, dataset_id, pk)).data)

    @extend_schema(operation_id="datasets_cases_partial_update", summary="Change a case (operators)",
                   request=api.CaseSerializer(partial=True), responses={200: api.CaseSerializer, **errors(400, 404)})
    def patch(self, request, dataset_id: int, pk: int):
        case = _case(request.user, dataset_id, pk)
        body = api.CaseSerializer(case, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        try:
            if body.service_data().get("source_run") != case.source_run_id:  # one it names anew
                scope.source_run_check(request.user, case.dataset, body.service_data())
            case = services.case_update(case=case, data=body.service_data())
        except services.CaseInvalid as exc:
            raise _invalid(exc) from exc
        return Response(api.CaseSerializer(case).data)

    @extend_schema(operation_id="datasets_cases_destroy",
                   summary="Delete a case (operators); experiments' results keep its name",
                   responses={204: None, **errors(404)})
    def delete(self, request, dataset_id: int, pk: int):
        _case(request.user, dataset_id, pk).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class CaseFromRunView(ApiView):
    required_perms = {"POST": (PERM_CHANGE_DATASET, PERM_VIEW)}

    @extend_schema(
        operation_id="datasets_cases_from_run",
        summary="Add a case made from a run, or from one of its steps: its checks prefilled from what it did",
        description=(
            "The case gets the run's task and customer and, from a step, the conversation before it (unless "
            "with_conversation is false). Its expectations are prefilled from what the run did from there: each "
            "tool it called with its short arguments (a sensitive one only as present), no destructive call or "
            "only identifiers it had seen, its stop reason, at most its iterations, and its answer's first line. "
            "`expectations` replaces them."
        ),
        request=api.CaseFromRunSerializer, responses={201: api.CaseSerializer, **errors(400, 404)},
        examples=[OpenApiExample("From step 2, own checks", request_only=True, value={
            "run": 12, "step": 2, "expectations": [{"kind": "tool_called", "tool": "get_weather"}]})],
    )
    def post(self, request, dataset_id: int):
        dataset = _dataset(request.user, dataset_id)
        body = api.CaseFromRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        chosen = body.validated_data
        try:
            # One the caller sees, of the dataset's project; another project's they do not see: "No run N."
            run = scope.run_for_dataset(request.user, dataset, chosen["run"])
        except services.CaseInvalid as exc:
            raise _invalid(exc) from exc
        steps = Step.objects.filter(run=run, kind=Step.Kind.TURN).count()
        step = chosen.get("step")
        if step is not None and step > max(steps, 1):
            raise ValidationError({"step": [f"Run {run.pk} has {steps} step{'s' if steps != 1 else ''}: "
                                            f"choose one from 1 to {max(steps, 1)} (1: from the start)."]})
        data = case_from_run(run, step=step, with_conversation=chosen["with_conversation"])
        if chosen.get("expectations") is not None:
            data["expectations"] = chosen["expectations"]
        if (chosen.get("name") or "").strip():
            data["name"] = chosen["name"].strip()
        try:
            case = services.case_add(dataset=dataset, data=data, user=request.user)
        except services.CaseInvalid as exc:
            raise _invalid(exc) from exc
        return _case_created(request, case)


# --- Export and import --------------------------------------------------------------------------------


class DatasetExportView(ApiView):
    required_perms = {"GET": (PERM_VIEW_DATASET,)}
    content_negotiation_class = IgnoreAcceptHeader

    @extend_schema(
        operation_id="datasets_export_jsonl", summary="A dataset's cases as JSON Lines, one case per line",
        description="What the import takes back: name, task, customer, messages, expectations, source_run, source_step.",
        responses={(200, NDJSON): OpenApiResponse(OpenApiTypes.STR, description="JSON Lines (one case per line)"),
                   **errors(404)},
    )
    def get(self, request, pk: int):
        dataset = _dataset(request.user, pk)
        response = StreamingHttpResponse(services.cases_export(dataset), content_type=f"{NDJSON}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="dataset-{dataset.pk}.jsonl"'
        return response


class NdjsonParser(BaseParser):
    """A JSON Lines body, as text (evals.datasets.cases_import reads its lines)."""

    media_type = NDJSON

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read(api.MAX_IMPORT_CHARS + 1) if stream is not None else b""
        if len(raw) > api.MAX_IMPORT_CHARS:
            raise RequestTooLarge(f"The JSONL is larger than {size_in_words(api.MAX_IMPORT_CHARS)}, the most an import takes.")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError("The JSONL is not UTF-8 text.") from exc


class DatasetImportView(ApiView):
    required_perms = {"POST": (PERM_CHANGE_DATASET,)}
    parser_classes = [BoundedJSONParser, NdjsonParser]

    @extend_schema(
        operation_id="datasets_import",
        summary="Add cases from JSON Lines (as the export writes them): all of them, or none",
        description=(
            f"The body is the JSONL itself (`Content-Type: {NDJSON}`) or JSON `{{\"jsonl\": \"...\"}}`, "
            f"up to {size_in_words(api.MAX_IMPORT_CHARS)} (the JSON body as a whole, its escapes included): a "
            "larger one is a 413. "
            "Every line is checked first: a 400 lists each problem with its line number (under `jsonl`), and "
            "nothing is added. A source run that no longer exists is dropped (the case is kept)."
        ),
        request={"application/json": api.DatasetImportSerializer, NDJSON: OpenApiTypes.STR},
        responses={201: api.ImportResultSerializer, **errors(400, 404, 413)},
    )
    def post(self, request, pk: int):
        dataset = _dataset(request.user, pk)
        if isinstance(request.data, str):
            text = request.data
        elif request.content_type.startswith(NDJSON):
            text = ""  # an empty body
        else:
            body = api.DatasetImportSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            text = body.validated_data["jsonl"]
        problems = _import_problems(text)
        if problems:
            raise ValidationError({"jsonl": problems})
        # A source run of another project (or one the caller does not see) is left out, as one that no longer exists.
        text = scope.import_text_scoped(request.user, dataset, text)
        try:
            added = services.cases_import(dataset=dataset, text=text, user=request.user)
        except services.CaseInvalid as exc:
            raise _invalid(exc, rename={"file": "jsonl"}) from exc
        return Response({"detail": f"{len(added)} case{'s' if len(added) != 1 else ''} imported.",
                         "imported": len(added), "cases": [case.pk for case in added]}, status=status.HTTP_201_CREATED)


def _import_problems(text: str) -> list[str]:
    """What the import's own checks cannot say of a line: values the database cannot store, a
    source run that is not an id, an expectation naming a measure or operator with a list."""
    problems = []
    for number, line in enumerate(services.jsonl_lines(text), 1):
        try:
            data = loads(line)
        except JsonTooDeep as exc:
            problems.append(f"Line {number}: not JSON ({exc}).")
            continue
        except ValueError:
            continue  # the import says so, with the line
        if not isinstance(data, dict):
            continue
        try:
            check_storable_json(data, "This line")
        except Exception as exc:  # Django's ValidationError
            problems.extend(f"Line {number}: {message[:1].upper()}{message[1:]}" for message in exc.messages)
            continue
        run = data.get("source_run")
        if run is not None and (isinstance(run, bool) or not isinstance(run, int) or not 1 <= run <= MAX_SAFE_INTEGER):
            problems.append(f"Line {number}, source_run: a run's id, or null.")
        step = data.get("source_step")
        if isinstance(step, int) and not isinstance(step, bool) and step > MAX_STEP:
            problems.append(f"Line {number}, source_step: a step number of at most {MAX_STEP}.")
        if isinstance(data.get("expectations"), list) and api.checkable(data["expectations"]) != data["expectations"]:
            problems.extend(f"Line {number}, expectations: {m}" for m in api.expectations_problems(data["expectations"]))
    return problems
