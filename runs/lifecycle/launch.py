"""Launching a run: made (runs.run_create, reruns.rerun_create) and handed to the workers once the
transaction that made it commits (engine.dispatch). Every door launches through here: the launch
page, the API, re-runs from either, and the `run_agent` command.

The doors check the approval policy first (launch_rules.launch_policy), because each answers a
refusal its own way (a form error, a 403, a message at the controls); everything else is refused
here, with InvalidRun, before anything is written or dispatched.
"""
from runs.engine.dispatch import run_dispatch
from runs.lifecycle.reruns import rerun_create
from runs.lifecycle.runs import run_create
from runs.models import Agent, Run


def run_launch(
    *,
    agent: Agent,
    task: str,
    user=None,
    overrides: dict | None = None,
    customer: str | None = None,
    approval_policy: str = "ask",
    shell_base_url: str = "",
    dispatch: bool = True,
) -> Run:
    """A new run (run_create's checks and arguments), handed to a worker once committed.
    `dispatch` False: the caller drives the run itself, in its own process (`run_agent` without
    --enqueue), so no worker is told of it."""
    run = run_create(
        agent=agent, task=task, user=user, overrides=overrides, customer=customer,
        approval_policy=approval_policy, shell_base_url=shell_base_url,
    )
    if dispatch:
        run_dispatch(run_id=run.pk)
    return run


def rerun_launch(*, original: Run, user=None, approval_policy: str = "ask") -> Run:
    """A finished run's task run again (rerun_create's checks; the policy is not copied), handed to
    a worker once committed."""
    run = rerun_create(original=original, user=user, approval_policy=approval_policy)
    run_dispatch(run_id=run.pk)
    return run
