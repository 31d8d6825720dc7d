"""What a run's model was shown when a call asked (provenance.runs_shown): each run's steps and
tool results up to its own asking step, however far other runs of the same page went."""
import pytest

from runs.models import Agent, Run, Step, ToolCall
from runs.supervision.evidence.provenance import runs_shown

pytestmark = pytest.mark.django_db


def run_with_results(steps: int) -> Run:
    """A run whose step i said "step i" and whose call there answered "ORD-<run>-<i>"."""
    run = Run.objects.create(agent=Agent.objects.first(), task="look things up")
    for index in range(steps):
        step = Step.objects.create(run=run, index=index, iteration=index + 1, preamble=[{"role": "user", "content": f"note {index}"}],
                                   message={"role": "assistant", "content": f"step {index}"})
        ToolCall.objects.create(run=run, step=step, index=0, call_id=f"c{index}", tool_name="lookup_order",
                                arguments="{}", result_text=f'{{"order_id": "ORD-{run.pk}-{index}"}}')
    return run


def test_each_run_is_read_up_to_its_own_step_only():
    short, long = run_with_results(6), run_with_results(6)
    steps, results = runs_shown({short.pk: 2, long.pk: 5})

    assert sorted(steps[short.pk]) == [0, 1, 2]  # not 3..5, which the other run's bound would allow
    assert sorted(steps[long.pk]) == [0, 1, 2, 3, 4, 5]
    assert steps[short.pk][2][1]["content"] == "step 2"
    # Results before the asking step: the call's own result (and later ones) was not read yet.
    assert [index for index, _text in results[short.pk]] == [0, 1]
    assert [index for index, _text in results[long.pk]] == [0, 1, 2, 3, 4]
    assert f"ORD-{short.pk}-1" in results[short.pk][-1][1]


def test_no_runs_no_queries(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert runs_shown({}) == ({}, {})
