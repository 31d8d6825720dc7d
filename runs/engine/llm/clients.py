"""Where a run's model requests go and the clients that send them: the endpoint (the offline demo
model, LLM_BASE_URL, or an agent's own URL behind the outbound guard), which of them may receive
LLM_API_KEY, and one `openai` client per thread and endpoint (runs/engine/llm/completions.py sends through them)."""

import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

import openai
from django.conf import settings

from runs.engine.llm.limits import cap_response

# One client (and so one connection pool) per thread. A worker drives up to a hundred runs in
# threads; a pool shared by all of them spends its time under the pool's lock, probing every idle
# connection on each request and each close (measured: half the threads waiting there).
_thread_clients = threading.local()
_clients_lock = threading.Lock()
_demo_server = None
_shared_ssl_context = None


class ModelError(Exception):
    """Every model in the list failed."""


@dataclass
class Endpoint:
    base_url: str
    api_key: str
    models: list[str]
    is_demo: bool = False
    guarded: bool = False  # typed by a user: every connection goes through the outbound guard


def demo_model_url() -> str:
    """The offline demo model: a configured one, or one started in this process on first use."""
    global _demo_server
    if settings.DEMO_MODEL_URL:
        return settings.DEMO_MODEL_URL
    with _clients_lock:
        if _demo_server is None:
            from runs.demo_model import start_server

            _demo_server = start_server(latency=settings.DEMO_MODEL_LATENCY, pace=settings.DEMO_MODEL_PACE)
    return _demo_server.url


def resolve_endpoint(*, base_url: str = "", models: list[str] | None = None, trusted: bool = False) -> Endpoint:
    """Where to send requests. With no API key and no base URL, the offline demo model.

    trusted=True: `base_url` was typed at the host's shell (run_agent --base-url), by the host's
    operator, so it is treated like LLM_BASE_URL: no outbound guard, and LLM_API_KEY is sent."""
    # Typed in the dashboard, the API or a launch: the same guard as HTTP tools, so an agent's
    # endpoint cannot be pointed at an internal service (LLM_BASE_URL is trusted).
    guarded = bool(base_url) and base_url != settings.LLM_BASE_URL and not trusted
    if guarded:
        from toolsapp.net import Blocked, check_url

        try:
            check_url(base_url)  # a clear reason before any request; each connection is checked again
        except Blocked as exc:
            raise ModelError(f"the model endpoint {base_url} was refused: {exc}") from None
    base_url = base_url or settings.LLM_BASE_URL
    models = list(models or settings.LLM_MODELS)
    if not base_url and not settings.LLM_API_KEY:
        return Endpoint(base_url=demo_model_url(), api_key="demo", models=models or ["demo"], is_demo=True)
    if not models:
        raise ModelError("no model configured: set LLM_MODELS or the agent's model list")
    base_url = base_url or DEFAULT_BASE_URL
    # Local servers (llama.cpp, Ollama, vLLM) accept any key; the client insists on one, so an
    # endpoint that may not have LLM_API_KEY gets the placeholder "none", never the key.
    key = settings.LLM_API_KEY if key_may_go_to(base_url, trusted=trusted) else ""
    return Endpoint(
        base_url=base_url,
        api_key=key or "none",
        models=models,
        guarded=guarded,
    )


DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Set in a run's frozen config only by run_agent, for a --base-url typed at the host's shell.
TRUSTED_BASE_URL_KEY = "base_url_from_shell"


def endpoint_settings(config: dict) -> dict:
    """resolve_endpoint's arguments for a run's frozen config."""
    return {
        "base_url": config["base_url"],
        "models": config["models"],
        "trusted": config.get(TRUSTED_BASE_URL_KEY) is True and bool(config["base_url"]),
    }


def key_may_go_to(base_url: str, *, trusted: bool = False) -> bool:
    """Whether LLM_API_KEY may be sent to `base_url`: the host of LLM_BASE_URL (OpenAI's when it is
    empty), a trusted --base-url, or a host in LLM_API_KEY_HOSTS. Any other endpoint (an agent's,
    typed in the dashboard or the API) gets no key: the project has no per-agent key."""
    from toolsapp.outbound_rules import host_matches

    if trusted:
        return True
    host = urlsplit(base_url).hostname or ""
    home = urlsplit(settings.LLM_BASE_URL or DEFAULT_BASE_URL).hostname or ""
    return bool(host) and host_matches(host, [home, *settings.LLM_API_KEY_HOSTS])


def client_for(
    base_url: str, api_key: str, timeout: float | None = None, *, retries: bool = True, guarded: bool = False
) -> openai.OpenAI:
    """This thread's client for an endpoint; retries=False gives one that never retries (it
    shares the connection pool; kept rather than copied per request, which costs a client).

    guarded=True: each connection resolves and checks the host when it opens and connects to the
    address it checked, so a DNS answer that changes after resolve_endpoint's check (rebinding)
    or a redirect cannot reach an internal address."""
    clients = getattr(_thread_clients, "by_key", None)
    if clients is None:
        clients = _thread_clients.by_key = {}
    key = (base_url, api_key, timeout, retries, guarded)
    client = clients.get(key)
    if client is None:
        if retries:
            client = openai.OpenAI(
                base_url=base_url,
                api_key=api_key,
                timeout=timeout or settings.LLM_TIMEOUT_SECONDS,
                max_retries=settings.LLM_MAX_RETRIES,
                http_client=_http_client(guarded),
            )
        else:
            client = client_for(base_url, api_key, timeout, guarded=guarded).with_options(max_retries=0)
        clients[key] = client
    return client


def _http_client(guarded: bool):
    # Every answer is read through the size and depth caps of runs/engine/llm/limits.py.
    hooks = {"response": [cap_response]}
    if guarded:
        from toolsapp.net import checked_transport

        # No proxy from the environment either (it would resolve the name itself), as for HTTP
        # tools and webhooks.
        return openai.DefaultHttpxClient(transport=checked_transport(_ssl_context()), trust_env=False, event_hooks=hooks)
    return openai.DefaultHttpxClient(verify=_ssl_context(), event_hooks=hooks)


def _ssl_context():
    """One TLS context for every client of the process. Building one loads the CA bundle: 32 ms
    of CPU, paid by each new thread's client, which under a burst of new runs cost more than
    the iterations themselves. A context is safe to share between threads."""
    global _shared_ssl_context
    if _shared_ssl_context is None:
        with _clients_lock:
            if _shared_ssl_context is None:
                import httpx2

                _shared_ssl_context = httpx2.create_ssl_context()
    return _shared_ssl_context


def model_wait_seconds(models: int) -> float:
    """How long one model request may legitimately take, every fallback and retry included: per
    model, each attempt's timeout plus the client's wait before the next (it honours Retry-After
    up to 60 s), and one more request without a forced tool choice."""
    per_model = (settings.LLM_MAX_RETRIES + 1) * (settings.LLM_TIMEOUT_SECONDS + 60) + settings.LLM_TIMEOUT_SECONDS
    return models * per_model + 30
