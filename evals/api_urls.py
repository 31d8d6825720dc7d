"""/api/v1/datasets/... and /api/v1/experiments/... (included before runs' API, whose catch-all
answers unknown /api/ paths with a JSON 404)."""
from django.urls import path

from evals.api import datasets, experiments

urlpatterns = [
    path("datasets/", datasets.DatasetListView.as_view(), name="api-dataset-list"),
    path("datasets/<int:pk>/", datasets.DatasetDetailView.as_view(), name="api-dataset-detail"),
    path("datasets/<int:pk>/export.jsonl", datasets.DatasetExportView.as_view(), name="api-dataset-export"),
    path("datasets/<int:pk>/import/", datasets.DatasetImportView.as_view(), name="api-dataset-import"),
    path("datasets/<int:dataset_id>/cases/", datasets.CaseListView.as_view(), name="api-case-list"),
    path("datasets/<int:dataset_id>/cases/from-run/", datasets.CaseFromRunView.as_view(), name="api-case-from-run"),
    path("datasets/<int:dataset_id>/cases/<int:pk>/", datasets.CaseDetailView.as_view(), name="api-case-detail"),
    path("experiments/", experiments.ExperimentListView.as_view(), name="api-experiment-list"),
    path("experiments/<int:pk>/", experiments.ExperimentDetailView.as_view(), name="api-experiment-detail"),
    path("experiments/<int:pk>/cancel/", experiments.ExperimentCancelView.as_view(), name="api-experiment-cancel"),
    path("experiments/<int:pk>/compare/<int:other_id>/", experiments.ExperimentCompareView.as_view(),
         name="api-experiment-compare"),
]
