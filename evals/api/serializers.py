"""Datasets, cases and experiments in the API. Input serializers read types and text; the rules
stay in evals' services (case_add, case_update, dataset_create, experiment_start), whose messages
come back by field. Output serializers render the rows (and describe them in the schema)."""
from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apikit.fields import choice
from apikit.strict import KnownFieldsOnly
from evals import services_projects as scope
from evals.datasets import MAX_ANSWERS, MAX_MESSAGES, MAX_TASK_CHARS, CaseInvalid
from evals.expectations import KINDS, MAX_EXPECTATIONS, expectation_errors
from evals.models import Case, CaseResult, Dataset, Experiment
from evals.scorecard import ORDER
from hosting.text import MAX_SAFE_INTEGER
from runs.engine.guards import POSITIVE_INT_LIMITS
from runs.engine.storage.text import check_storable_json, storable_text
from runs.lifecycle.experiment_runs import EXPERIMENT_OVERRIDES
from runs.lifecycle.forks import MAX_STEP
from runs.models import Agent, Run

MAX_IMPORT_CHARS = 10 * 1024 * 1024
EXPECTATIONS_HELP = (
    "Checks over the case's run, each an object with a `kind`: " + ", ".join(KINDS) + " (see evals/expectations.py). "
    'Example: [{"kind": "tool_called", "tool": "get_weather", "conditions": [{"path": "$.city", "op": "eq", '
    '"value": "Lagos"}]}, {"kind": "stop_reason", "in": ["final_answer"]}]'
)
EXPECTATION_SCHEMA = {
    "type": "object", "additionalProperties": True, "required": ["kind"],
    "properties": {"kind": {"type": "string", "enum": list(KINDS)}},
}


def an_id(**kwargs) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=1, max_value=MAX_SAFE_INTEGER, **kwargs)


def limit_field(name: str) -> serializers.Field:
    """The field of one limit an experiment may change, as a launch's (runs/web/api/serializers/runs.py,
    whose tool choices an experiment does not change); omitted, the version's applies."""
    if name in POSITIVE_INT_LIMITS:
        return serializers.IntegerField(required=False, min_value=1, max_value=MAX_SAFE_INTEGER)
    return serializers.FloatField(required=False)


@extend_schema_field(EXPECTATION_SCHEMA)
class ExpectationField(serializers.DictField):
    pass


def expectations_field(help_text: str = "", **kwargs) -> serializers.ListField:
    return serializers.ListField(child=ExpectationField(), max_length=MAX_EXPECTATIONS,
                                 help_text=help_text + EXPECTATIONS_HELP, **kwargs)


def checkable(value):
    """`value` with any list or object where a name is expected (a measure, an operator) as text,
    so the checks can say it is not one (they look names up in sets)."""
    if isinstance(value, list):
        return [checkable(v) for v in value]
    if isinstance(value, dict):
        return {k: (repr(v) if k in ("measure", "op") and isinstance(v, (list, dict)) else checkable(v))
                for k, v in value.items()}
    return value


def expectations_problems(expectations) -> list[str]:
    """What is wrong with expectations, in words (values the database cannot store included)."""
    try:
        check_storable_json(expectations, "This list")
    except Exception as exc:  # Django's ValidationError
        return list(getattr(exc, "messages", [str(exc)]))
    return expectation_errors(checkable(expectations))


def validated_expectations(value):
    problems = expectations_problems(value)
    if problems:
        raise serializers.ValidationError(problems)
    return value


def _user(field):
    """The caller (a serializer or field's context has the request)."""
    return getattr(field.context.get("request"), "user", None)


@extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}],
                      "description": "The project's id, or its slug; answered as its id."})
class ProjectField(serializers.Field):
    """A new dataset's project: one where the caller may make datasets (evals.services_projects)."""

    def to_internal_value(self, data):
        user = _user(self)
        if user is None:
            raise serializers.ValidationError("No project.")
        dataset = getattr(self.parent, "instance", None)
        try:
            if dataset is None:
                return scope.project_for_dataset(user, data)
            project = scope.project_named(user, data)
        except CaseInvalid as exc:
            raise serializers.ValidationError(exc.errors["project"]) from exc
        if project.pk != dataset.project_id:  # the same one: a dataset read and sent back whole
            raise serializers.ValidationError(
                f"Dataset {dataset.name} stays in project {dataset.project.name} (its cases come from that project's "
                "runs, its experiments run its agents): make a new dataset in the other project.")
        return project

    def to_representation(self, value):
        return value.pk


class DatasetSerializer(KnownFieldsOnly, serializers.ModelSerializer):
    project = ProjectField(required=False, help_text=(
        "The team whose dataset it is: its cases come from that project's runs, its experiments run its agents; "
        "fixed once made. Omitted: the caller's one project where they may make datasets, else the Default project."))
    project_name = serializers.CharField(source="project.name", read_only=True)
    case_count = serializers.IntegerField(read_only=True, help_text="How many cases it holds.")
    experiment_count = serializers.IntegerField(read_only=True, help_text="How many experiments ran it.")
    created_by = serializers.CharField(source="created_by.username", read_only=True, allow_null=True)
    description = serializers.CharField(required=False, allow_blank=True, max_length=10_000)

    class Meta:
        model = Dataset
        fields = ["id", "name", "project", "project_name", "description", "case_count", "experiment_count",
                  "created_by", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {"name": {"validators": []}}  # unique: the service's rule, with its message


class CaseSerializer(KnownFieldsOnly, serializers.ModelSerializer):
    dataset = serializers.IntegerField(source="dataset_id", read_only=True)
    name = serializers.CharField(required=False, allow_blank=True, max_length=200,
                                 help_text="Empty or omitted: the task's first words.")
    task = serializers.CharField(max_length=MAX_TASK_CHARS)
    customer = serializers.CharField(required=False, allow_blank=True, max_length=100, trim_whitespace=False,
                                     help_text="Whose data the tools may touch; empty uses the default.")
    messages = serializers.ListField(
        child=serializers.DictField(), required=False, max_length=MAX_MESSAGES,
        help_text="The conversation after the task the case starts from: chat messages (user, assistant, tool).")
    expectations = expectations_field(required=False)
    source_run = an_id(source="source_run_id", required=False, allow_null=True,
                       help_text="The run it came from: a simulated call repeating one of its calls gets its result.")
    source_step = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_STEP,
                                           help_text="The source run's step the case starts at.")
    answers = serializers.ListField(
        child=serializers.DictField(), required=False, allow_null=True, max_length=MAX_ANSWERS,
        help_text="The source run's answered calls (tool, arguments as canonical JSON text, result, text, run, "
                  "call_id): a simulated call the same as one of them gets its recorded answer. Omitted: copied "
                  "from the source run.")
    created_by = serializers.CharField(source="created_by.username", read_only=True, allow_null=True)

    class Meta:
        model = Case
        fields = ["id", "dataset", "name", "task", "customer", "messages", "expectations", "source_run", "source_step",
                  "answers", "created_by", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]

    def validate_messages(self, value):
        return check_storable_json(value, "This list")

    def validate_expectations(self, value):
        return validated_expectations(value)

    def service_data(self) -> dict:
        """The validated values as the services take them (`source_run`: an id)."""
        data = dict(self.validated_data)
        if "source_run_id" in data:
            data["source_run"] = data.pop("source_run_id")
        return data


class CaseFromRunSerializer(KnownFieldsOnly, serializers.Serializer):
    run = an_id(help_text="The run the case is made from.")
    step = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_STEP,
                                    help_text="The run's step the case starts at; omitted or 1: from the start.")
    with_conversation = serializers.BooleanField(
        required=False, default=True,
        help_text="With a step: start from the run's conversation before it (false: only the task).")
    expectations = expectations_field(
        "Omitted or null: prefilled from what the run did (its response shows them). ", required=False, allow_null=True)
    name = serializers.CharField(required=False, allow_blank=True, max_length=200,
                                 help_text="Omitted: the run's id and task.")

    def validate_expectations(self, value):
        return None if value is None else validated_expectations(value)


class JsonLinesField(serializers.CharField):
    """JSONL as text. A raw NUL is left for the import to name with its line and column (DRF's
    CharField refuses it with "Null characters are not allowed."): the line holding it is not JSON,
    so nothing of it is stored."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]


class DatasetImportSerializer(KnownFieldsOnly, serializers.Serializer):
    jsonl = JsonLinesField(allow_blank=True, trim_whitespace=False, max_length=MAX_IMPORT_CHARS,
                           help_text="One case per line, as the export writes them.")


class ImportResultSerializer(serializers.Serializer):
    detail = serializers.CharField()
    imported = serializers.IntegerField(help_text="How many cases were added.")
    cases = serializers.ListField(child=serializers.IntegerField(), help_text="The new cases' ids, in line order.")


@extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}],
                      "description": "The agent's id, or its name."})
class AgentField(serializers.Field):
    """An agent the caller sees (one of a project they do not see is answered as if it did not exist)."""

    def to_internal_value(self, data):
        agent = None
        user = _user(self)
        agents = Agent.objects.none() if user is None else scope.agents_seen(user)
        if isinstance(data, int) and not isinstance(data, bool) and 1 <= data <= MAX_SAFE_INTEGER:
            agent = agents.filter(pk=data).first()
        elif isinstance(data, str) and storable_text(data) and len(data) <= 200:
            agent = agents.filter(name=data).first()
            if agent is None and data.isdigit() and int(data) <= MAX_SAFE_INTEGER:
                agent = agents.filter(pk=int(data)).first()
        else:
            raise serializers.ValidationError("An agent's id or name.")
        if agent is None:
            raise serializers.ValidationError(f"No agent {data!r}.")
        return agent

    def to_representation(self, value):
        return value.pk


class ExperimentCreateSerializer(KnownFieldsOnly, serializers.Serializer):
    dataset = an_id(help_text="The dataset whose cases run.")
    agent = AgentField(help_text="An agent of the dataset's project.")
    version = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_SAFE_INTEGER,
                                       help_text="The agent's version by number; omitted: the current one (or draft).")
    draft = serializers.BooleanField(required=False, default=False,
                                     help_text="Run the agent's newest draft instead of its current version.")
    models = serializers.ListField(child=serializers.CharField(max_length=200), required=False, allow_empty=True,
                                   max_length=20, help_text="Models instead of the version's, in fallback order.")
    baseline = an_id(required=False, allow_null=True,
                     help_text="The experiment of the same dataset it is compared with by default.")
    # ...then one field per limit an experiment may change (EXPERIMENT_OVERRIDES), in get_fields.

    def get_fields(self):
        fields = super().get_fields()
        for name in EXPERIMENT_OVERRIDES:
            if name != "models":
                fields[name] = limit_field(name)
        return fields

    # A dataset, agent or baseline of a project the caller does not see is answered as if it did not exist.

    def validate_dataset(self, value):
        user = _user(self)
        dataset = None if user is None else scope.datasets_seen(user).filter(pk=value).first()
        if dataset is None:
            raise serializers.ValidationError(f"No dataset {value}.")
        return dataset

    def validate_baseline(self, value):
        if value is None:
            return None
        user = _user(self)
        baseline = None if user is None else scope.experiments_seen(user).filter(pk=value).first()
        if baseline is None:
            raise serializers.ValidationError(f"No experiment {value}.")
        return baseline

    def validate(self, attrs):
        if attrs.get("version") is not None and attrs.get("draft"):
            raise serializers.ValidationError({"draft": ["Give a version number or draft, not both."]})
        problem = scope.agent_problem(attrs["dataset"], attrs["agent"])
        if problem:
            raise serializers.ValidationError({"agent": [problem]})
        baseline = attrs.get("baseline")
        if baseline is not None and baseline.dataset_id != attrs["dataset"].pk:
            raise serializers.ValidationError(
                {"baseline": [f"Experiment {baseline.pk} is of another dataset ({baseline.dataset.name})."]})
        return attrs

    def overrides(self) -> dict:
        return {name: self.validated_data[name] for name in EXPERIMENT_OVERRIDES if name in self.validated_data}


class ExperimentSerializer(serializers.ModelSerializer):
    dataset_name = serializers.CharField(source="dataset.name")
    agent_name = serializers.CharField(source="agent.name")
    status = choice(Experiment.Status.choices, "ExperimentStatus")
    overrides = serializers.DictField(help_text="Models or limits changed for this experiment.")
    left_out_tools = serializers.ListField(child=serializers.CharField(),
                                           help_text="The version's tools that were gone or disabled.")
    cases_failed = serializers.IntegerField(help_text="Cases scored so far that failed.")
    pass_rate = serializers.FloatField(allow_null=True, help_text="Passed of done, 0 to 1; null before any is done.")
    created_by = serializers.CharField(source="created_by_name")

    class Meta:
        model = Experiment
        fields = ["id", "dataset", "dataset_name", "agent", "agent_name", "agent_version", "draft", "label", "overrides",
                  "left_out_tools", "baseline", "status", "cases_total", "cases_done", "cases_passed", "cases_failed",
                  "pass_rate", "created_by", "created_at", "finished_at"]
        read_only_fields = fields


class CheckSerializer(serializers.Serializer):
    kind = serializers.CharField()
    label = serializers.CharField(help_text="What was wanted, in words.")
    ok = serializers.BooleanField()
    seen = serializers.CharField(allow_blank=True, help_text="What was found, in words.")
    opinion = serializers.BooleanField(default=False, help_text="A model's opinion (the judge), not a fact.")
    judge = serializers.DictField(required=False, help_text="The judge's model, reason and error.")


class SimulatedCallSerializer(serializers.Serializer):
    tool = serializers.CharField()
    call_id = serializers.CharField(allow_blank=True)
    step = serializers.IntegerField()
    answered_from = serializers.DictField(allow_null=True,
                                          help_text="The source run's call whose result it got; null: not executed.")
    would_be = serializers.CharField(help_text="What would have decided the call outside the experiment.")


class CaseResultSerializer(serializers.ModelSerializer):
    case = serializers.IntegerField(source="case_id", allow_null=True, help_text="Null once the case was deleted.")
    run = serializers.IntegerField(source="run_id", allow_null=True, help_text="Null once the run was deleted.")
    status = choice(CaseResult.Status.choices, "CaseResultStatus")
    passed = serializers.BooleanField(allow_null=True, help_text="Null until scored.")
    checks = CheckSerializer(many=True)
    simulated = SimulatedCallSerializer(many=True, help_text="Each simulated call: its answer's source, what would be.")
    stop_reason = choice(Run.StopReason.choices, "StopReason", allow_null=True)

    class Meta:
        model = CaseResult
        fields = ["id", "case", "case_name", "run", "status", "passed", "checks", "simulated", "stop_reason",
                  "iterations", "tokens", "cost_usd", "seconds", "scored_at"]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["stop_reason"] = data["stop_reason"] or None
        return data


class DistributionSerializer(serializers.Serializer):
    label = serializers.CharField()
    count = serializers.IntegerField(help_text="Scored cases with a run.")
    total = serializers.FloatField()
    min = serializers.FloatField()
    median = serializers.FloatField()
    p90 = serializers.FloatField()
    max = serializers.FloatField()
    mean = serializers.FloatField()


class DistributionsSerializer(serializers.Serializer):
    iterations = DistributionSerializer()
    tokens = DistributionSerializer()
    cost_usd = DistributionSerializer()
    seconds = DistributionSerializer()


class ExperimentDetailSerializer(ExperimentSerializer):
    compared_with = serializers.IntegerField(
        allow_null=True, help_text="The experiment it is compared with by default: its baseline, or else the newest "
        "earlier finished one of the same dataset and agent with the current version.")
    distributions = DistributionsSerializer(help_text="Iterations, tokens, cost and time over the scored cases.")
    results = CaseResultSerializer(source="card_results", many=True)

    class Meta(ExperimentSerializer.Meta):
        fields = [*ExperimentSerializer.Meta.fields, "compared_with", "distributions", "results"]
        read_only_fields = fields


class ExperimentActionSerializer(serializers.Serializer):
    detail = serializers.CharField()
    experiment = ExperimentSerializer()


CHANGES = list(ORDER)


class CasePairSerializer(serializers.Serializer):
    case = serializers.IntegerField(allow_null=True)
    case_name = serializers.CharField()
    change = choice([(c, c) for c in CHANGES], "CaseChange")
    before_run = serializers.IntegerField(allow_null=True)
    before_passed = serializers.BooleanField(allow_null=True)
    after_run = serializers.IntegerField(allow_null=True)
    after_passed = serializers.BooleanField(allow_null=True)
    cost_usd_delta = serializers.FloatField(allow_null=True, help_text="After minus before; null unless in both.")
    seconds_delta = serializers.FloatField(allow_null=True, help_text="After minus before; null unless in both.")


class ChangeCountsSerializer(serializers.Serializer):
    regressed = serializers.IntegerField(help_text="Passed before, fails now.")
    fixed = serializers.IntegerField(help_text="Failed before, passes now.")
    still_failing = serializers.IntegerField()
    still_passing = serializers.IntegerField()
    only_in_one = serializers.IntegerField(help_text="Cases of only one of the two experiments.")
    not_scored_yet = serializers.IntegerField()


class ComparisonSerializer(serializers.Serializer):
    before = ExperimentSerializer()
    after = ExperimentSerializer()
    counts = ChangeCountsSerializer()
    cost_usd_delta = serializers.FloatField(help_text="After's total cost minus before's, over scored cases.")
    seconds_delta = serializers.FloatField(help_text="After's total time minus before's, over scored cases.")
    pairs = CasePairSerializer(many=True, help_text="Regressions first, then fixed, still failing, still passing.")
