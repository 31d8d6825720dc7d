"""HTTP tools: the worker POSTs the validated arguments to the URL an admin registered.

Request body: {"tool", "arguments", "idempotency_key", "run_id", "call_id"}, and the key again in
the Idempotency-Key header so a server can return the first outcome for a repeated call. A 2xx
JSON answer is the result; anything else is an error the model reads.

Tool config: {"url": "https://...", "secret_env": "TOOL_SECRET_CRM"}. A secret is never stored:
`secret_env` names an environment variable (it must start with TOOL_SECRET_, so a tool cannot be
pointed at the server's own secrets) whose value is sent as "Authorization: Bearer <value>",
and only to the hosts the host's operator listed for it in TOOL_SECRET_HOSTS (never along a
redirect to another origin).
"""
import os
from urllib.parse import urlsplit

from django.conf import settings

from toolsapp import net
from toolsapp.executors.base import ConfigField, Executor, ToolContext, ToolError
from toolsapp.outbound_rules import SECRET_ENV_PREFIX, host_matches

ERROR_BODY_CHARS = 300


def secret_host_error(url: str, secret_env: str) -> str | None:
    """Why the secret named `secret_env` may not be sent to `url`'s host, or None when it may."""
    allowed = settings.TOOL_SECRET_HOSTS.get(secret_env) or []
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        host = ""
    if host and host_matches(host, allowed):
        return None
    where = ", ".join(allowed) if allowed else "no host (TOOL_SECRET_HOSTS does not list it)"
    return f"The secret {secret_env} may be sent only to {where}, not to {host or 'this URL'}."


class HttpExecutor(Executor):
    kind, label, order = "http", "HTTP endpoint", 10
    reaches_outside = True
    config_fields = (
        ConfigField(
            "url", "URL (HTTP tools)", url=True, max_length=2000,
            help_text="The worker POSTs the validated arguments and the idempotency key here as JSON. "
                      "Private and loopback addresses are refused unless OUTBOUND_ALLOWLIST names them.",
            api_help_text="HTTP tools: where the worker POSTs the arguments (private addresses need OUTBOUND_ALLOWLIST).",
        ),
        ConfigField(
            "secret_env", "Secret from environment (HTTP tools)", max_length=100,
            help_text=f"Name of an environment variable starting with {SECRET_ENV_PREFIX}; its value is sent "
                      "as a Bearer token. The secret itself is never stored.",
            api_help_text="HTTP tools: environment variable (TOOL_SECRET_...) whose value is sent as a Bearer token.",
        ),
    )
    # As before kinds declared their rows: the handler row (the tool's name), not the URL, which
    # may carry a key and is not shown to every viewer.
    detail_template = "toolsapp/kinds/_handler.html"

    def config_errors(self, config: dict) -> dict[str, str]:
        errors = {}
        url = config.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            errors["url"] = "An HTTP tool needs a URL starting with http:// or https://."
        secret_env = config.get("secret_env") or ""
        if secret_env and not secret_env.startswith(SECRET_ENV_PREFIX):
            errors["secret_env"] = f"The secret's environment variable must start with {SECRET_ENV_PREFIX}."
        return errors

    def notices(self, tool) -> list[str]:
        config = tool.config or {}
        if config.get("secret_env") and config.get("url"):
            refused = secret_host_error(config["url"], config["secret_env"])
            if refused:  # the operator may list the host later; until then every call is refused
                return [f"{refused} Calls will be refused until TOOL_SECRET_HOSTS allows it."]
        return []

    def run(self, tool, arguments: dict, context: ToolContext):
        config = tool.config or {}
        problems = self.config_errors(config)
        if problems:
            raise ToolError(f"the tool is misconfigured: {' '.join(problems.values())}")
        headers = {"Idempotency-Key": context.idempotency_key}
        secret_env = config.get("secret_env")
        secrets = ()
        if secret_env:
            refused = secret_host_error(config["url"], secret_env)
            if refused:
                raise ToolError(f"the request was refused before sending: {refused}")
            secret = os.environ.get(secret_env)
            if not secret:
                raise ToolError(f"the tool's secret is not set on this worker ({secret_env})")
            headers["Authorization"] = f"Bearer {secret}"
            secrets = (secret,)
        payload = {
            "tool": tool.name,
            "arguments": arguments,
            "idempotency_key": context.idempotency_key,
            "run_id": context.run_id,
            "call_id": context.call_id,
        }
        try:
            response = net.post_json(
                config["url"], payload, timeout=tool.timeout_seconds, headers=headers, secrets=secrets
            )
        except net.Blocked as exc:
            raise ToolError(f"the request was refused before sending: {exc}") from None
        except net.OutboundError as exc:
            raise ToolError(str(exc)) from None
        if not 200 <= response.status < 300:
            text = response.body[:ERROR_BODY_CHARS].decode(errors="replace")
            raise ToolError(f"the tool's server answered HTTP {response.status}: {text}")
        try:
            return response.json()
        except net.OutboundError as exc:
            raise ToolError(str(exc)) from None
