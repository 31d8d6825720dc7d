from django.urls import path

from evals import views

urlpatterns = [
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset_detail"),
    path("datasets/<int:pk>/import/", views.dataset_import, name="dataset_import"),
    path("datasets/<int:pk>/export.jsonl", views.dataset_export, name="dataset_export"),
    path("datasets/<int:pk>/delete/", views.dataset_delete, name="dataset_delete"),
    path("datasets/<int:dataset_id>/cases/<int:pk>/", views.case_edit, name="case_edit"),
    path("runs/<int:pk>/add-to-dataset/", views.run_add_to_dataset, name="run_add_to_dataset"),
    path("experiments/<int:pk>/", views.experiment_detail, name="experiment_detail"),
    path("experiments/<int:pk>/progress/", views.experiment_progress, name="experiment_progress"),
    path("experiments/<int:pk>/cancel/", views.experiment_cancel_view, name="experiment_cancel"),
    path("experiments/<int:pk>/compare/<int:other>/", views.experiment_compare, name="experiment_compare"),
    path("experiments/<int:pk>/compare/<int:other>/case/<int:case_id>/", views.case_compare, name="case_compare"),
]
