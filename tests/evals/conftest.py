"""Datasets and experiments driven in this process (the worker tests start real workers)."""
import pytest

from evals.scoring import experiment_catch_up
from runs.engine.loop import run_advance
from runs.models import Run


@pytest.fixture
def drive():
    """drive(experiment) -> the experiment once every case's run was driven here and scored."""

    def go(experiment):
        for run_id in Run.objects.filter(case_result__experiment=experiment).order_by("pk").values_list("pk", flat=True):
            run_advance(run_id=run_id)
        experiment_catch_up(experiment, waited=0, judge=True)
        experiment.refresh_from_db()
        return experiment

    return go
