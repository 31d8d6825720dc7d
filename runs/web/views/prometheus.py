from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from runs.observability.prometheus.exposition import metrics_text, scrape_refusal


@require_GET
def prometheus_metrics(request):
    """The Prometheus scrape target; who may read it: runs/observability/prometheus/exposition.py."""
    refusal = scrape_refusal(request)
    if refusal == 401:
        response = HttpResponse("A valid bearer token is required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if refusal is not None:
        return HttpResponse(status=refusal)
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)
