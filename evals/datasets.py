"""Datasets and their cases: made from runs, by hand, through the API, or imported as JSONL.

Every write checks its values first and says what is wrong by field (CaseInvalid); an import is
all or nothing, with the line of each problem.
"""
import json
from collections.abc import Iterator

from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from evals.expectations import expectation_errors
from evals.models import Case, Dataset, Experiment
from hosting.text import MAX_JSON_DEPTH, loads, nested_deeper_than, storable_json
from runs.engine.tools.simulation import recorded_answers
from runs.lifecycle.launch_rules import customer_problem
from runs.models import Run

CASE_FIELDS = ("name", "task", "customer", "messages", "expectations", "source_run", "source_step", "answers")
MAX_ANSWERS = 500
MAX_CASES_PER_IMPORT = 5000
MAX_MESSAGES = 500
MAX_TASK_CHARS = 100_000
MAX_STEP = 1_000_000


class CaseInvalid(ValueError):
    """What is wrong with a case, by field: {"task": ["..."]}."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items()))
        self.errors = errors


# Control characters a JSON string may not hold raw, by the names an editor shows them with.
CONTROL_NAMES = {0: "NUL", 8: "backspace", 9: "tab", 10: "line feed", 12: "form feed", 13: "carriage return", 27: "ESC"}


def not_json_problem(number: int, line: str, exc: ValueError) -> str:
    """Where a line is not JSON, in words: "Line 3: not JSON: invalid control character NUL (U+0000)
    at column 17 (inside a string, write it as \\u0000)." Python's own message stops at "Invalid
    control character at"; its position is in the exception, not in the text."""
    if not isinstance(exc, json.JSONDecodeError):
        return f"Line {number}: not JSON ({exc})."  # nested too deeply: the exception says how deep
    where = f"at column {exc.colno}"
    if exc.msg.startswith("Invalid control character") and exc.pos < len(line):
        code = ord(line[exc.pos])
        named = f"{CONTROL_NAMES[code]} (U+{code:04X})" if code in CONTROL_NAMES else f"U+{code:04X}"
        return (f"Line {number}: not JSON: invalid control character {named} {where} "
                f"(inside a string, write it as \\u{code:04x}).")
    message = exc.msg.removesuffix(" at")  # "Unterminated string starting at": the column follows
    return f"Line {number}: not JSON: {message[:1].lower()}{message[1:]} {where}."


def datasets_counted():
    """Datasets with `case_count`, `experiment_count` and `last_experiment_id`, in one statement
    (the datasets page and the API list them)."""
    def count(model):
        rows = model.objects.filter(dataset=OuterRef("pk")).order_by().values("dataset").annotate(n=Count("pk"))
        return Coalesce(Subquery(rows.values("n"), output_field=IntegerField()), 0)

    newest = Experiment.objects.filter(dataset=OuterRef("pk")).order_by("-pk").values("pk")[:1]
    return Dataset.objects.select_related("created_by").annotate(
        case_count=count(Case), experiment_count=count(Experiment), last_experiment_id=Subquery(newest))


def dataset_create(*, name: str, description: str = "", user=None) -> Dataset:
    name = (name or "").strip()
    errors = {}
    if not name or len(name) > 100:
        errors["name"] = ["A name of 1 to 100 characters."]
    elif Dataset.objects.filter(name=name).exists():
        errors["name"] = [f"A dataset named {name!r} exists already."]
    if errors:
        raise CaseInvalid(errors)
    return Dataset.objects.create(name=name, description=description or "",
                                  created_by=user if getattr(user, "is_authenticated", False) else None)


def case_errors(data: dict) -> dict[str, list[str]]:
    """What is wrong with a case's values, by field (those absent take their defaults)."""
    errors: dict[str, list[str]] = {}

    def add(field, message):
        errors.setdefault(field, []).append(message)

    unknown = sorted(set(data) - set(CASE_FIELDS))
    if unknown:
        add("non_field_errors", f"Unknown fields: {', '.join(unknown)}.")
    if nested_deeper_than(data):
        add("non_field_errors", f"Nested deeper than {MAX_JSON_DEPTH} levels.")
        return errors
    if not storable_json({k: v for k, v in data.items() if k != "source_run"}):
        add("non_field_errors", "Text must not hold NUL characters or lone surrogates.")
        return errors
    name, task = data.get("name", ""), data.get("task")
    if not isinstance(name, str) or len(name) > 200:
        add("name", "Text of at most 200 characters.")
    if not isinstance(task, str) or not task.strip():
        add("task", "The task is needed.")
    elif len(task) > MAX_TASK_CHARS:
        add("task", f"At most {MAX_TASK_CHARS} characters.")
    customer = data.get("customer", "")
    if not isinstance(customer, str):
        add("customer", "Text.")
    elif customer and customer_problem(customer):
        add("customer", customer_problem(customer).capitalize() + ".")
    messages = data.get("messages", [])
    if not isinstance(messages, list) or len(messages) > MAX_MESSAGES or not all(
        isinstance(m, dict) and m.get("role") in ("user", "assistant", "tool") for m in messages
    ):
        add("messages", f"A list of at most {MAX_MESSAGES} chat messages (user, assistant or tool).")
    else:
        problem = conversation_problem(messages)
        if problem:
            add("messages", problem)
    for message in expectation_errors(data.get("expectations", [])):
        add("expectations", message)
    answers = data.get("answers", [])
    if not isinstance(answers, list) or len(answers) > MAX_ANSWERS or not all(
        isinstance(a, dict) and isinstance(a.get("tool"), str) and isinstance(a.get("result"), dict)
        and (isinstance(a.get("args_hash"), str) or isinstance(a.get("arguments"), str))
        and isinstance(a.get("text", ""), str) for a in answers
    ):
        add("answers", f"A list of at most {MAX_ANSWERS} recorded calls, each with tool, args_hash (or arguments as "
                       "JSON text), result (an object) and text.")
    step = data.get("source_step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= MAX_STEP):
        add("source_step", f"A step number from 1 to {MAX_STEP}.")
    return errors


def conversation_problem(messages: list[dict]) -> str | None:
    """What a model would refuse in a case's conversation: each tool result must answer a call of
    the assistant message before it, once (the chat completions API's rule)."""
    open_ids: set[str] = set()
    for number, message in enumerate(messages, 1):
        role = message["role"]
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in calls):
                return f"Message {number}: tool_calls must be a list of calls, each with an id."
            open_ids = {c["id"] for c in calls}
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids:
                return f"Message {number}: a tool result answers no call of the assistant message before it ({call_id!r})."
            open_ids.discard(call_id)
        else:
            open_ids = set()
        if role != "assistant" and not isinstance(message.get("content"), str):
            return f"Message {number}: its content must be text."
    return None


def case_add(*, dataset: Dataset, data: dict, user=None) -> Case:
    data = _with_answers(_with_run(data))
    errors = case_errors(data)
    if errors:
        raise CaseInvalid(errors)
    values = {field: data[field] for field in CASE_FIELDS if field in data}
    values.setdefault("name", "")
    if not values["name"].strip():
        values["name"] = " ".join(values["task"].split())[:200]
    return Case.objects.create(dataset=dataset, created_by=user if getattr(user, "is_authenticated", False) else None,
                               **values)


def case_update(*, case: Case, data: dict) -> Case:
    if "source_run" in data and "answers" not in data:
        data = {**data, "answers": None}  # another source run: its answers are copied again
    data = _with_answers(_with_run({**{field: getattr(case, field) for field in CASE_FIELDS}, **data}))
    errors = case_errors(data)
    if errors:
        raise CaseInvalid(errors)
    for field in CASE_FIELDS:
        setattr(case, field, data[field])
    case.save()
    return case


def _with_run(data: dict) -> dict:
    """`source_run` as a Run (an id is looked up; one that does not exist is an error)."""
    run = data.get("source_run")
    if run is None or isinstance(run, Run):
        return data
    if isinstance(run, bool) or not isinstance(run, int) or not Run.objects.filter(pk=run).exists():
        raise CaseInvalid({"source_run": [f"No run {run!r}."]})
    return {**data, "source_run": Run.objects.get(pk=run)}


def _with_answers(data: dict) -> dict:
    """The source run's answered calls, copied (runs.engine.tools.simulation.recorded_answers), unless given."""
    if data.get("answers") is not None:
        return data
    run = data.get("source_run")
    return {**data, "answers": recorded_answers(run.pk) if isinstance(run, Run) else []}


def case_data(case: Case) -> dict:
    """A case as JSON (what the export writes and the import reads back)."""
    return {
        "name": case.name, "task": case.task, "customer": case.customer, "messages": case.messages,
        "expectations": case.expectations, "source_run": case.source_run_id, "source_step": case.source_step,
        "answers": case.answers,
    }


def cases_export(dataset: Dataset) -> Iterator[str]:
    """The dataset's cases as JSONL, one line each."""
    for case in dataset.cases.order_by("pk").iterator():
        yield json.dumps(case_data(case), ensure_ascii=False) + "\n"


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text, split at line feeds only (a CR before one is dropped): the
    export writes U+2028, U+2029 and U+0085 inside strings as they are, which is valid JSON, and
    str.splitlines would cut a case in two there."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def cases_import(*, dataset: Dataset, text: str, user=None) -> list[Case]:
    """Add every case of a JSONL text, or none: CaseInvalid names the line of each problem. A
    source run that no longer exists is dropped (the case is kept; its calls are then simulated
    as "not executed")."""
    rows, errors = [], {}
    lines = [(number, line) for number, line in enumerate(jsonl_lines(text), 1) if line.strip()]
    if len(lines) > MAX_CASES_PER_IMPORT:
        raise CaseInvalid({"file": [f"At most {MAX_CASES_PER_IMPORT} cases at once."]})
    if not lines:
        raise CaseInvalid({"file": ["No cases: one JSON object per line."]})
    existing = set(Run.objects.filter(pk__in=[_source(line) for _, line in lines if _source(line)])
                   .values_list("pk", flat=True))
    for number, line in lines:
        try:
            data = loads(line)
        except ValueError as exc:
            errors.setdefault("file", []).append(not_json_problem(number, line, exc))
            continue
        if not isinstance(data, dict):
            errors.setdefault("file", []).append(f"Line {number}: a JSON object is needed.")
            continue
        source = data.get("source_run")
        if not isinstance(source, int) or isinstance(source, bool) or source not in existing:
            data.pop("source_run", None)
        problems = case_errors(data)
        for field, messages in problems.items():
            errors.setdefault("file", []).extend(f"Line {number}, {field}: {m}" for m in messages)
        rows.append(data)
    if errors:
        raise CaseInvalid(errors)
    with transaction.atomic():
        return [case_add(dataset=dataset, data=data, user=user) for data in rows]


def _source(line: str):
    try:
        value = loads(line).get("source_run")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
