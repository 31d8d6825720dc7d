"""Running a finished run's task again."""
from runs.lifecycle.runs import InvalidRun, run_create
from runs.models import Run


def rerun_create(*, original: Run, user=None, approval_policy: str = "ask") -> Run:
    """A new run of the same agent, task, overrides and customer, linked to the original. The
    agent's current settings apply to everything the launch did not override; raises InvalidRun
    if they (or the overrides) are no longer valid, or beyond what `user` may choose.

    The approval policy is not copied: a run launched with --approve-all at the host's shell
    and re-run from the browser would approve every new destructive call without a person.
    The caller passes the policy the person re-running chose and may choose (launch_policy)."""
    if not original.is_finished:
        raise InvalidRun("only a finished run can be run again")
    if original.experiment:
        raise InvalidRun("an experiment's run is not run again on its own: it would run for real; run its experiment "
                         "again instead")
    return run_create(
        agent=original.agent,
        task=original.task,
        user=user,
        overrides=dict(original.overrides),
        customer=original.customer,
        approval_policy=approval_policy,
        rerun_of=original,
    )
