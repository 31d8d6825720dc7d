"""The admin shows datasets with their cases, experiments and results, and adds none of the
latter two (they are started and scored by the product)."""
from django.contrib.auth.models import User
from django.urls import reverse

from evals.models import Case, Dataset


def test_the_admin_lists_datasets_cases_and_experiments(client, demo_data):
    client.force_login(User.objects.create_superuser("root", password="pw-root-long-enough"))
    dataset = Dataset.objects.create(name="orders")
    Case.objects.create(dataset=dataset, name="cancel one", task="Cancel order ORD-1001")
    page = client.get(reverse("admin:evals_dataset_change", args=[dataset.pk])).content.decode()
    assert "cancel one" in page and "Cancel order ORD-1001" in page
    assert client.get(reverse("admin:evals_experiment_changelist")).status_code == 200
    assert client.get(reverse("admin:evals_experiment_add")).status_code == 403
    assert client.get(reverse("admin:evals_caseresult_add")).status_code == 403
