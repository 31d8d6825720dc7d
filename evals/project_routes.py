"""Which project each of the datasets' and experiments' routes is about (projects/routes.py)."""
from evals.models import Dataset, Experiment
from projects.routes import both, register, values
from runs.models import Run

dataset = values(Dataset, "project_id", pk="pk")
cases_dataset = values(Dataset, "project_id", pk="dataset_id")
experiment = values(Experiment, "agent__project_id", pk="pk")


def register_routes() -> None:
    register({
        **dict.fromkeys(["dataset_detail", "dataset_import", "dataset_export", "dataset_delete",
                         "api-dataset-detail", "api-dataset-export", "api-dataset-import"], dataset),
        **dict.fromkeys(["case_edit", "api-case-list", "api-case-from-run", "api-case-detail"], cases_dataset),
        "run_add_to_dataset": values(Run, "agent__project_id", pk="pk"),
        **dict.fromkeys(["experiment_detail", "experiment_progress", "experiment_cancel", "api-experiment-detail",
                         "api-experiment-cancel"], experiment),
        "api-experiment-compare": both(experiment, values(Experiment, "agent__project_id", pk="other_id")),
        **dict.fromkeys(["experiment_compare", "case_compare"],
                        both(experiment, values(Experiment, "agent__project_id", pk="other"))),
    })
