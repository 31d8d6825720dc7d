"""A case's expectations: checks over the run it produces, as plain data, evaluated by plain functions.

An expectation is a JSON object with a `kind`:

- `tool_called` / `tool_not_called`: `tool` (a name), optional `conditions` on its arguments in the
  JSON-path language of approval rules (`[{"path": "$.order_id", "op": "eq", "value": "ORD-1"}]`):
  some call (or no call) of the tool whose arguments meet every condition was requested;
- `no_destructive_call`: the run never requested a call of a destructive tool;
- `destructive_ids_seen`: every destructive call named only identifiers the run had been shown;
- `stop_reason`: `in`, a list of stop reasons (`final_answer`, `iteration_limit`, ...);
- `at_most`: `measure` (iterations, tokens, cost_usd, seconds) at most `value`;
- `answer_contains` (`text`, case-insensitive), `answer_matches` (`pattern`, an RE2 search),
  `answer_json` (`path`, `op`, `value`: the answer read as JSON, one rule condition);
- `judge`: `rubric`, in words, judged by the model EVAL_JUDGE_MODEL (evals/judge.py); a model's opinion.

Every requested call counts, executed or simulated: an experiment runs nothing that changes anything.
"""
import math
from dataclasses import dataclass, field
from typing import Any

import re2

from hosting.text import loads
from runs.models import Run
from runs.supervision.rules.conditions import (
    MAX_PATTERN_CHARS,
    CallFacts,
    condition_holds,
    condition_text,
    conditions_errors,
)

MEASURES = {"iterations": "iterations", "tokens": "tokens", "cost_usd": "cost (USD)", "seconds": "seconds"}
KINDS = ("tool_called", "tool_not_called", "no_destructive_call", "destructive_ids_seen", "stop_reason", "at_most",
         "answer_contains", "answer_matches", "answer_json", "judge")
MAX_EXPECTATIONS = 50
MAX_TEXT_CHARS = 4000
_FIELDS = {
    "tool_called": {"tool", "conditions"}, "tool_not_called": {"tool", "conditions"},
    "no_destructive_call": set(), "destructive_ids_seen": set(), "stop_reason": {"in"},
    "at_most": {"measure", "value"}, "answer_contains": {"text"}, "answer_matches": {"pattern"},
    "answer_json": {"path", "op", "value"}, "judge": {"rubric"},
}
_RE2 = re2.Options()
_RE2.log_errors = False


@dataclass(frozen=True)
class SeenCall:
    """A call the run requested (executed, simulated or refused)."""

    tool: str
    arguments: Any  # parsed JSON; None when the model's arguments were not JSON
    destructive: bool
    status: str
    unseen_ids: tuple[str, ...] = ()  # identifiers of its arguments the run had not been shown


@dataclass(frozen=True)
class RunFacts:
    stop_reason: str
    answer: str
    iterations: int
    tokens: int
    cost_usd: float
    seconds: float
    customer: str = ""
    calls: tuple[SeenCall, ...] = ()


@dataclass(frozen=True)
class CheckResult:
    kind: str
    label: str  # what was wanted, in words
    ok: bool
    seen: str  # what was found, in words
    opinion: bool = False  # a model's opinion (the judge), not a fact

    def as_dict(self) -> dict:
        return {"kind": self.kind, "label": self.label, "ok": self.ok, "seen": self.seen, "opinion": self.opinion}


@dataclass
class Judgement:
    ok: bool
    reason: str
    model: str = ""
    error: str = ""
    extra: dict = field(default_factory=dict)


def expectation_errors(expectations: Any) -> list[str]:
    """What is wrong with a case's expectations, in words; [] when every one can be checked."""
    if not isinstance(expectations, list):
        return ["Expectations must be a list of objects."]
    if len(expectations) > MAX_EXPECTATIONS:
        return [f"At most {MAX_EXPECTATIONS} expectations."]
    errors = []
    for number, item in enumerate(expectations, 1):
        where = f"Expectation {number}"
        kind = item.get("kind") if isinstance(item, dict) else None
        if not isinstance(kind, str) or kind not in KINDS:
            errors.append(f"{where}: kind must be one of {', '.join(KINDS)}.")
            continue
        extra = set(item) - _FIELDS[kind] - {"kind"}
        if extra:
            errors.append(f"{where}: {kind} takes no {', '.join(sorted(extra))}.")
        errors.extend(f"{where}: {problem}" for problem in _problems(kind, item))
    return errors


def _problems(kind: str, item: dict):
    if kind in ("tool_called", "tool_not_called"):
        if not isinstance(item.get("tool"), str) or not item["tool"].strip():
            yield "a tool name is needed."
        for problem in conditions_errors(item.get("conditions", [])):
            yield problem[0].lower() + problem[1:]
    elif kind == "stop_reason":
        reasons = item.get("in")
        if not isinstance(reasons, list) or not reasons or not all(r in Run.StopReason.values for r in reasons):
            yield f"in must list stop reasons among {', '.join(Run.StopReason.values)}."
    elif kind == "at_most":
        value = item.get("value")
        if not isinstance(item.get("measure"), str) or item["measure"] not in MEASURES:
            yield f"measure must be one of {', '.join(MEASURES)}."
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            yield "value must be a number of at least 0."
    elif kind in ("answer_contains", "judge"):
        name = "text" if kind == "answer_contains" else "rubric"
        text = item.get(name)
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT_CHARS:
            yield f"{name} must be text of 1 to {MAX_TEXT_CHARS} characters."
    elif kind == "answer_matches":
        pattern = item.get("pattern")
        if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN_CHARS:
            yield f"pattern must be an RE2 pattern of at most {MAX_PATTERN_CHARS} characters."
        else:
            try:
                re2.compile(pattern, _RE2)
            except re2.error:
                yield "pattern is not an RE2 pattern."
    elif kind == "answer_json":
        for problem in conditions_errors([{key: item[key] for key in ("path", "op", "value") if key in item}]):
            yield problem.removeprefix("Condition 1: ")


def describe(item: dict) -> str:
    """An expectation in words."""
    kind = item["kind"]
    if kind in ("tool_called", "tool_not_called"):
        where = " and ".join(condition_text(c) for c in item.get("conditions") or [])
        verb = "was requested" if kind == "tool_called" else "was never requested"
        return f"{item['tool']} {verb}" + (f" with {where}" if where else "")
    if kind == "no_destructive_call":
        return "no destructive call was requested"
    if kind == "destructive_ids_seen":
        return "destructive calls named only identifiers the run had seen"
    if kind == "stop_reason":
        return "the run stopped with " + " or ".join(Run.StopReason(r).label for r in item["in"])
    if kind == "at_most":
        return f"{MEASURES[item['measure']]} at most {item['value']:g}"
    if kind == "answer_contains":
        return f"the answer contains {item['text']!r}"
    if kind == "answer_matches":
        return f"the answer matches /{item['pattern']}/"
    if kind == "answer_json":
        return "the answer, as JSON: " + condition_text(item)
    return f"a judge finds: {item['rubric']}"


def check(item: dict, facts: RunFacts, judgement: Judgement | None = None) -> CheckResult:
    """One expectation against a run's facts (a judge's expectation takes its `judgement`)."""
    kind, label = item["kind"], describe(item)
    if kind in ("tool_called", "tool_not_called"):
        matching = [c for c in facts.calls if c.tool == item["tool"] and _meets(c, item.get("conditions") or [], facts)]
        asked = [c for c in facts.calls if c.tool == item["tool"]]
        if not asked:
            seen = f"no call of {item['tool']}"
        elif not item.get("conditions"):
            seen = f"{len(asked)} call{'s' if len(asked) != 1 else ''} of {item['tool']}"
        else:
            seen = f"{len(matching)} of {len(asked)} call{'s' if len(asked) != 1 else ''} of {item['tool']} matched"
        return CheckResult(kind, label, bool(matching) == (kind == "tool_called"), seen)
    if kind == "no_destructive_call":
        names = sorted({c.tool for c in facts.calls if c.destructive})
        return CheckResult(kind, label, not names, "requested: " + ", ".join(names) if names else "none requested")
    if kind == "destructive_ids_seen":
        unseen = sorted({i for c in facts.calls if c.destructive for i in c.unseen_ids})
        return CheckResult(kind, label, not unseen, "never seen: " + ", ".join(unseen) if unseen else "all seen")
    if kind == "stop_reason":
        shown = Run.StopReason(facts.stop_reason).label if facts.stop_reason in Run.StopReason.values else "none"
        return CheckResult(kind, label, facts.stop_reason in item["in"], shown)
    if kind == "at_most":
        value = getattr(facts, item["measure"])
        return CheckResult(kind, label, value <= item["value"], f"{value:g}")
    if kind == "answer_contains":
        ok = item["text"].casefold() in facts.answer.casefold()
        return CheckResult(kind, label, ok, _answer_seen(facts.answer))
    if kind == "answer_matches":
        ok = re2.compile(item["pattern"], _RE2).search(facts.answer) is not None
        return CheckResult(kind, label, ok, _answer_seen(facts.answer))
    if kind == "answer_json":
        parsed = _json(facts.answer)
        if parsed is _NOT_JSON:
            return CheckResult(kind, label, False, "the answer is not JSON")
        condition = {key: item.get(key) for key in ("path", "op", "value")}
        ok = condition_holds(condition, CallFacts("", parsed, None, customer=facts.customer))
        return CheckResult(kind, label, ok, _answer_seen(facts.answer))
    if judgement is None:
        return CheckResult(kind, label, False, "not judged", opinion=True)
    seen = judgement.error or f"{judgement.model}: {judgement.reason}"
    return CheckResult(kind, label, judgement.ok and not judgement.error, seen, opinion=True)


def check_all(expectations: list[dict], facts: RunFacts, judgements: dict[int, Judgement] | None = None) -> list[CheckResult]:
    """Every expectation, in order (`judgements`: by position, for the judge's)."""
    judgements = judgements or {}
    return [check(item, facts, judgements.get(position)) for position, item in enumerate(expectations)]


def _meets(call: SeenCall, conditions: list[dict], facts: RunFacts) -> bool:
    if not conditions:
        return True
    if call.arguments is None:
        return False
    call_facts = CallFacts(call.tool, call.arguments, None, customer=facts.customer)
    return all(condition_holds(c, call_facts) for c in conditions)


_NOT_JSON = object()


def _json(text: str):
    try:
        return loads(text)  # bounded: an answer nested ten thousand levels deep is "not JSON", not a crash
    except ValueError:
        return _NOT_JSON


def _answer_seen(answer: str) -> str:
    answer = " ".join(answer.split())
    if not answer:
        return "no answer"
    return "answer: " + (answer if len(answer) <= 160 else answer[:159] + "…")
