"""/metrics, the Prometheus scrape target, and who may read it: METRICS_TOKEN (a bearer token)
and/or METRICS_ALLOWED_NETWORKS (CIDRs); each one set must pass. With neither set the endpoint
does not exist (404), so nothing leaks by default. What it holds: runs/observability/prometheus/."""
import hashlib
import hmac
import ipaddress

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from accounts.signin_throttle import client_ip
from hosting.replica import reads_from_replica
from runs.observability.prometheus.exposition import metrics_text


@require_GET
@reads_from_replica  # counters may be a moment stale (hosting/replica.py)
def prometheus_metrics(request):
    refusal = scrape_refusal(request)
    if refusal == 401:
        response = HttpResponse("A valid bearer token is required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if refusal is not None:
        return HttpResponse(status=refusal)
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)


def address_allowed(address: str, networks: list[str]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(network, strict=False) for network in networks)


def token_matches(request, token: str) -> bool:
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    # Constant time: how much of a guess was right must not show in the answer's timing, nor its
    # length (digests of equal length are compared).
    digest = lambda text: hashlib.sha256(text.encode()).digest()  # noqa: E731
    return hmac.compare_digest(digest(given.strip()), digest(token)) and scheme.lower() == "bearer"


def scrape_refusal(request) -> int | None:
    """None when this request may read the metrics, else the HTTP status to refuse it with."""
    token, networks = settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS
    if not token and not networks:
        return 404
    if networks and not address_allowed(client_ip(request), networks):  # the rule sign-in throttling uses
        return 403
    if token and not token_matches(request, token):
        return 401
    return None
