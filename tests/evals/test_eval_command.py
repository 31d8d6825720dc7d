"""`manage.py eval`: a dataset run as an experiment through a real Celery worker (or --inline in the
command's own process) and the demo model, its scorecard printed, JUnit XML written, and the exit
code CI reads: 1 on a regression against the baseline, a pass rate under --min-pass-rate, or a
timeout; bad arguments start nothing."""
import io

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from junitparser import Error, Failure, JUnitXml

from evals.datasets import case_add, dataset_create
from evals.models import Experiment
from runs.lifecycle.agents import agent_draft_save
from runs.models import Agent, Run, ToolCall

WEATHER = "What's the weather in Lagos and London?"
GOT_NO_WEATHER = "get_weather was requested: no call of get_weather"


def support_dataset(name: str = "support"):
    """Three cases the demo model passes with the demo agent's current tools."""
    dataset = dataset_create(name=name)
    final = {"kind": "stop_reason", "in": ["final_answer"]}
    case_add(dataset=dataset, data={"name": "weather", "task": WEATHER, "expectations": [
        {"kind": "tool_called", "tool": "get_weather"}, final]})
    case_add(dataset=dataset, data={"name": "weather in Lagos", "task": "How is the weather in Lagos today?",
                                    "expectations": [{"kind": "tool_called", "tool": "get_weather", "conditions": [
                                        {"path": "$.city", "op": "eq", "value": "Lagos"}]}]})
    case_add(dataset=dataset, data={"name": "cancel", "task": "Cancel order ORD-1001", "customer": "acme",
                                    "expectations": [{"kind": "tool_called", "tool": "lookup_order"}, final]})
    return dataset


def draft_without_weather() -> None:
    agent = Agent.objects.get(name="demo")
    agent_draft_save(agent=agent, data={"tools": list(agent.tools.exclude(name="get_weather"))})


def run_eval(*args) -> tuple[int, str]:
    """(the exit code, what was printed) of `manage.py eval ARGS`."""
    out = io.StringIO()
    try:
        call_command("eval", *args, stdout=out, stderr=io.StringIO())
    except SystemExit as exit_:
        return exit_.code, out.getvalue()
    return 0, out.getvalue()


NOTHING = "OK, nothing to fail on (no baseline to compare with, no --min-pass-rate): "


def last_line(out: str) -> str:
    return out.strip().splitlines()[-1]


def test_a_draft_that_lost_a_tool_regresses_through_a_worker_and_fails_ci(celery_worker_proc, demo_data, tmp_path):
    celery_worker_proc()
    dataset = support_dataset()

    code, out = run_eval("support", "--agent", "demo", "--timeout", "120")

    first = Experiment.objects.get()
    assert code == 0, out
    assert (first.status, first.cases_done, first.cases_passed, first.draft) == ("finished", 3, 3, False)
    assert f"Experiment {first.pk} started: {first.label} of agent demo on dataset support (3 cases, on the workers)" in out
    assert "3/3 cases done, 0 failing" in out
    assert f"Experiment {first.pk}: {first.label} (agent demo, dataset support, finished)" in out
    assert "3/3 cases passed (100%)" in out
    for measure in ("Iterations", "Tokens", "Cost (USD)", "Time (s)"):
        assert any(line.strip().startswith(measure) and "median" in line and "p90" in line and "max" in line
                   for line in out.splitlines()), measure
    assert "Failing cases" not in out and "No baseline to compare with" in out
    assert f"Dashboard: {settings.SITE_URL.rstrip('/')}/experiments/{first.pk}/" in out
    assert last_line(out) == f"{NOTHING}3 of 3 cases passed their checks."

    draft_without_weather()
    junit = tmp_path / "eval.xml"
    code, out = run_eval("support", "--agent", "demo", "--draft", "--against", str(first.pk), "--junit", str(junit))

    second = Experiment.objects.exclude(pk=first.pk).get()
    assert code == 1, out
    assert second.draft and second.label.startswith("draft v") and second.baseline_id == first.pk
    assert (second.status, second.cases_done, second.cases_passed) == ("finished", 3, 1)
    assert not ToolCall.objects.filter(run__case_result__experiment=second, tool_name="get_weather").exists()
    assert "3/3 cases done, 2 failing" in out
    assert "1/3 cases passed (33%)" in out
    lines = out.splitlines()
    failing = lines.index("Failing cases (2):")
    assert lines[failing + 1:failing + 5] == [
        "  weather (Final answer)", f"    - {GOT_NO_WEATHER}",
        "  weather in Lagos (Final answer)",
        "    - get_weather was requested with $.city equals 'Lagos': no call of get_weather",
    ], out
    assert f"Compared with experiment {first.pk} ({first.label}): 2 regressed, 1 still passing" in out
    regressions = lines.index("  Regressions (2):")
    assert lines[regressions + 1].startswith("    - weather (cost ")
    assert lines[regressions + 2].startswith("    - weather in Lagos (cost ")
    assert "Fixed" not in out
    assert f"JUnit XML written to {junit}" in out
    assert last_line(out) == f"FAILED: 2 regressions against experiment {first.pk}"

    xml = JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    assert suite.name == f"support: {second.label}"
    assert (suite.tests, suite.failures, suite.errors) == (3, 2, 0)
    cases = {case.name: case for case in suite}
    assert set(cases) == {c.name for c in dataset.cases.all()}
    assert {case.classname for case in cases.values()} == {"support"}
    assert cases["cancel"].is_passed
    for name in ("weather", "weather in Lagos"):
        [failure] = cases[name].result
        assert isinstance(failure, Failure)
        assert failure.message.startswith(f"regressed against experiment {first.pk}: ")
        assert "get_weather was requested" in failure.message and "no call of get_weather" in failure.message
    assert cases["weather"].result[0].message == f"regressed against experiment {first.pk}: {GOT_NO_WEATHER}"
    assert cases["weather"].time >= 0


@pytest.mark.parametrize("args, message", [
    (["nowhere", "--agent", "demo"], "no dataset named 'nowhere' (datasets: empty, other, support)"),
    (["support", "--agent", "nobody"], "no agent named 'nobody'"),
    (["support"], "the following arguments are required: --agent"),
    (["support", "--agent", "demo", "--version", "99"], "agent demo has no version 99"),
    (["support", "--agent", "demo", "--version", "1", "--draft"], "give --version N or --draft, not both"),
    (["support", "--agent", "demo", "--draft"], "agent demo has no draft newer than its current version"),
    (["support", "--agent", "demo", "--min-pass-rate", "1.5"], "--min-pass-rate must be a number from 0 to 1"),
    (["support", "--agent", "demo", "--min-pass-rate", "most"], "--min-pass-rate must be a number from 0 to 1"),
    (["support", "--agent", "demo", "--timeout", "0"], "--timeout must be a number of seconds above 0"),
    (["support", "--agent", "demo", "--model", " "], "--model must not be empty"),
    (["support", "--agent", "demo", "--against", "999999"], "--against: no experiment 999999"),
    (["support", "--agent", "demo", "--against", "OTHER"], "is of dataset 'other', not 'support'"),
    (["support", "--agent", "demo", "--junit", "/no/such/directory/eval.xml"], "--junit: the directory of"),
    (["empty", "--agent", "demo"], "dataset empty has no cases"),
])
def test_bad_arguments_say_what_is_wrong_and_start_nothing(demo_data, args, message):
    support_dataset()
    dataset_create(name="empty")
    other = Experiment.objects.create(dataset=dataset_create(name="other"), agent=Agent.objects.get(name="demo"),
                                      agent_version=1, label="v1")
    args = [str(other.pk) if a == "OTHER" else a for a in args]
    with pytest.raises(CommandError) as raised:
        call_command("eval", *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert message in str(raised.value)
    assert raised.value.returncode == 2 or message.startswith("the following arguments")
    assert list(Experiment.objects.values_list("pk", flat=True)) == [other.pk]
    assert not Run.objects.exists()


def test_inline_runs_the_cases_in_the_command_without_a_worker(demo_data, broker, tmp_path):
    support_dataset()
    code, out = run_eval("support", "--agent", "demo", "--inline", "--timeout", "120")
    first = Experiment.objects.get()
    assert code == 0, out
    assert "(3 cases, in this process)" in out and "3/3 cases passed (100%)" in out
    assert first.status == "finished"
    assert set(Run.objects.filter(case_result__experiment=first).values_list("status", flat=True)) == {"succeeded"}

    # No --against: compared with the newest finished experiment of the agent on the dataset.
    draft_without_weather()
    junit = tmp_path / "draft.xml"
    code, out = run_eval("support", "--agent", "demo", "--draft", "--inline", "--junit", str(junit))
    second = Experiment.objects.exclude(pk=first.pk).get()
    assert code == 1, out
    assert second.baseline_id is None
    assert f"Compared with experiment {first.pk} ({first.label}): 2 regressed, 1 still passing" in out
    assert last_line(out) == f"FAILED: 2 regressions against experiment {first.pk}"
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    failures = {case.name: case.result[0].message for case in suite if not case.is_passed}
    assert set(failures) == {"weather", "weather in Lagos"}
    assert all(m.startswith(f"regressed against experiment {first.pk}: ") for m in failures.values())


def test_a_pass_rate_under_the_minimum_fails_and_one_at_it_passes(demo_data, broker):
    dataset = dataset_create(name="half")
    case_add(dataset=dataset, data={"name": "weather", "task": WEATHER, "expectations": [
        {"kind": "tool_called", "tool": "get_weather"}]})
    case_add(dataset=dataset, data={"name": "paris", "task": WEATHER, "expectations": [
        {"kind": "answer_contains", "text": "Paris"}]})

    code, out = run_eval("half", "--agent", "demo", "--inline", "--min-pass-rate", "0.8")
    assert code == 1, out
    assert "1/2 cases passed (50%)" in out
    lines = out.splitlines()
    assert lines[lines.index("Failing cases (1):") + 2].startswith("    - the answer contains 'Paris': answer: ")
    assert last_line(out) == "FAILED: pass rate 50% is under 80%"

    code, out = run_eval("half", "--agent", "demo", "--inline", "--min-pass-rate", "0.5")
    assert code == 0, out
    first = Experiment.objects.order_by("pk").first()
    assert f"Compared with experiment {first.pk}" in out and "1 still failing, 1 still passing" in out
    assert last_line(out) == (f"OK, no regression against experiment {first.pk}, pass rate 50% is at least 50%: "
                              f"1 of 2 cases passed their checks and 1 failed, as in experiment {first.pk}.")


def test_no_regression_with_every_case_failing_says_ok_and_how_many_failed(demo_data, broker):
    dataset = dataset_create(name="paris")
    for name in ("paris", "paris again"):
        case_add(dataset=dataset, data={"name": name, "task": WEATHER, "expectations": [
            {"kind": "answer_contains", "text": "Paris"}]})
    code, out = run_eval("paris", "--agent", "demo", "--inline")
    assert code == 0 and last_line(out) == f"{NOTHING}0 of 2 cases passed their checks and 2 failed.", out

    code, out = run_eval("paris", "--agent", "demo", "--inline")  # against the first: nothing regressed
    first = Experiment.objects.order_by("pk").first()
    assert code == 0, out
    assert last_line(out) == (f"OK, no regression against experiment {first.pk}: 0 of 2 cases passed their checks "
                              f"and 2 failed, as in experiment {first.pk}.")


def test_a_timeout_cancels_the_experiment_and_reports_the_cases_as_errors(demo_data, broker, tmp_path):
    support_dataset()
    junit = tmp_path / "timeout.xml"
    # No worker and not --inline: nobody takes the cases.
    code, out = run_eval("support", "--agent", "demo", "--timeout", "1", "--junit", str(junit))
    experiment = Experiment.objects.get()
    assert code == 1, out
    assert experiment.status == "cancelled"
    assert set(Run.objects.filter(case_result__experiment=experiment).values_list("status", flat=True)) == {"cancelled"}
    assert f"Timed out after 1 s with 0/3 cases done: experiment {experiment.pk} cancelled." in out
    assert "Did not end (3):" in out and "  weather: its run was cancelled" in out
    assert "Failing cases" not in out
    assert last_line(out) == "FAILED: timed out after 1 s with 0/3 cases done (the experiment was cancelled)"
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert (suite.tests, suite.failures, suite.errors) == (3, 0, 3)
    for case in suite:
        [error] = case.result
        assert isinstance(error, Error) and error.message == "the case did not end: its run was cancelled"


def test_the_models_flag_replaces_the_versions_and_junit_holds_any_answer(demo_data, broker, script, tmp_path):
    model = script({"content": "All done \x1b[31mred\x1b[0m \x00 here"})
    dataset = dataset_create(name="answers")
    case_add(dataset=dataset, data={"name": "says ok", "task": "Say ok", "expectations": [
        {"kind": "answer_contains", "text": "ok"}]})
    junit = tmp_path / "answers.xml"
    code, out = run_eval("answers", "--agent", "demo", "--model", model, "--inline", "--junit", str(junit))
    experiment = Experiment.objects.get()
    assert code == 0, out  # no baseline, no minimum: a failing case alone does not fail CI
    assert last_line(out) == f"{NOTHING}0 of 1 case passed its checks and 1 failed."
    assert experiment.overrides == {"models": [model]} and experiment.label.endswith(f" with {model}")
    assert "0/1 cases passed (0%)" in out and "    - the answer contains 'ok': answer: All done" in out
    [case] = next(iter(JUnitXml.fromfile(str(junit))))
    [failure] = case.result
    assert failure.message.startswith("the answer contains 'ok': answer: All done \ufffd[31mred")
