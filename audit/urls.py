from django.urls import path

from audit import views

urlpatterns = [
    path("audit/", views.audit_list, name="audit_list"),
    path("audit/export.jsonl", views.audit_export, name="audit_export"),
]
