"""Running a finished run's task again."""
from runs.models import Run
from runs.services.runs import InvalidRun, run_create


def rerun_create(*, original: Run, user=None) -> Run:
    """A new run of the same agent, task, overrides, customer and approval policy, linked to
    the original. The agent's current settings apply to everything the launch did not
    override; raises InvalidRun if they (or the overrides) are no longer valid."""
    if not original.is_finished:
        raise InvalidRun("only a finished run can be run again")
    return run_create(
        agent=original.agent,
        task=original.task,
        user=user,
        overrides=dict(original.overrides),
        customer=original.customer,
        approval_policy=original.config.get("approval_policy", "ask"),
        rerun_of=original,
    )
