"""/metrics carries how people decide, per project and never per person: decisions by kind of
decider, seconds from the card appearing, quick approvals, contradicted approvals and nudges
shown; pruning the runs takes nothing away from the counters."""
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runs.lifecycle.archive import runs_delete
from runs.models import Run
from tests.supervision.quality.history import history

pytestmark = pytest.mark.django_db
TOKEN = "scrape-me-47"


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []


def scrape(client) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def decision_samples(samples) -> dict:
    names = ("agentsite_project_decisions_total", "agentsite_approvals_quick_total",
             "agentsite_approvals_contradicted_total", "agentsite_nudges_shown_total",
             "agentsite_approval_decide_seconds_count", "agentsite_approval_decide_seconds_bucket")
    return {key: v for key, v in samples.items() if key[0] in names}


def test_metrics_carry_the_decision_figures_per_project(client, token):
    history()
    samples = scrape(client)
    # Shop, all time: the period's 11 and one older decision by people; the run's policy; an expiry.
    assert value(samples, "agentsite_project_decisions_total", project="shop", decider="person") == 12
    assert value(samples, "agentsite_project_decisions_total", project="shop", decider="policy") == 1
    assert value(samples, "agentsite_project_decisions_total", project="shop", decider="expiry") == 1
    assert value(samples, "agentsite_approvals_quick_total", project="shop") == 6
    for why, n in (("failed", 1), ("moot", 2), ("reversed", 1)):
        assert value(samples, "agentsite_approvals_contradicted_total", project="shop", decider="person", why=why) == n
    assert value(samples, "agentsite_approvals_contradicted_total", project="other", decider="person", why="failed") == 3
    assert value(samples, "agentsite_nudges_shown_total", project="shop") == 2
    assert value(samples, "agentsite_approval_decide_seconds_count", project="shop") == 12
    # Within 10 s: 1 1 2 3 4 5 8 (the older decision took 1 s).
    assert value(samples, "agentsite_approval_decide_seconds_bucket", project="shop", le="10.0") == 7
    labels = {name for (_, key) in decision_samples(samples) for name, _v in key}
    assert labels <= {"project", "decider", "why", "le"}  # never a person


def test_pruning_the_runs_takes_nothing_away(client, token):
    history()
    before = decision_samples(scrape(client))
    assert runs_delete(run_ids=list(Run.objects.values_list("pk", flat=True))) == 3
    assert decision_samples(scrape(client)) == before
