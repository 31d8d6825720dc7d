import json
from urllib.parse import urlparse

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.engine.guards import InvalidLimit, check_positive_int
from runs.engine.loop import run_advance
from runs.engine.storage.snapshots import run_data
from runs.lifecycle.launch import run_launch
from runs.lifecycle.launch_rules import launch_overrides
from runs.lifecycle.runs import InvalidRun
from runs.models import Agent, Run


def _bad(message: str) -> CommandError:
    return CommandError(message, returncode=2)


class Command(BaseCommand):
    help = "Run an agent on a task and print the outcome (synchronously, or --enqueue for the workers)."

    def add_arguments(self, parser):
        parser.add_argument("task")
        parser.add_argument("--agent", default="demo")
        parser.add_argument(
            "--base-url",
            help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1; typed here by the host's operator, it is "
                 "trusted like LLM_BASE_URL (no outbound guard, and LLM_API_KEY is sent to it)",
        )
        parser.add_argument("--api-key", help="Key for --base-url (prefer the LLM_API_KEY variable)")
        parser.add_argument("--model", action="append", dest="models", help="Model to try; repeat for fallbacks")
        parser.add_argument("--tools", help="Comma-separated tool names allowed in this run")
        parser.add_argument("--max-iterations")
        parser.add_argument("--first-tool-choice", choices=["required", "auto", "none"])
        parser.add_argument("--customer", help="Whose data the tools may touch")
        policy = parser.add_mutually_exclusive_group()
        policy.add_argument("--approve-all", action="store_true", help="Approve every destructive call")
        policy.add_argument("--reject-all", action="store_true", help="Reject every destructive call")
        parser.add_argument("--enqueue", action="store_true", help="Hand the run to the workers and exit")
        parser.add_argument("--json", action="store_true", help="Print one JSON object")

    def handle(self, *args, **options):
        agent = Agent.objects.filter(name=options["agent"]).first()
        if agent is None:
            names = ", ".join(Agent.objects.values_list("name", flat=True)) or "none"
            raise _bad(f"no agent named {options['agent']!r} (agents: {names})")
        overrides = self._overrides(agent, options)
        if options["api_key"]:
            if options["enqueue"]:
                raise _bad("--api-key cannot be handed to workers; set LLM_API_KEY in their environment")
            settings.LLM_API_KEY = options["api_key"]  # this process only; never stored with the run
        policy = "approve" if options["approve_all"] else "reject" if options["reject_all"] else "ask"
        try:
            # Without --enqueue this process drives the run below, so no worker is told of it.
            run = run_launch(
                agent=agent, task=options["task"], overrides=overrides, customer=options["customer"],
                approval_policy=policy, shell_base_url=options["base_url"] or "", dispatch=options["enqueue"],
            )
        except InvalidRun as exc:
            raise _bad(str(exc)) from None
        if options["enqueue"]:
            self.stdout.write(json.dumps({"run_id": run.pk, "status": run.status}) if options["json"] else str(run.pk))
            return
        run_advance(run_id=run.pk)
        run.refresh_from_db()
        self.stdout.write(render(run, as_json=options["json"]))

    def _overrides(self, agent: Agent, options) -> dict:
        """The flags' settings that differ from the agent's (the launch page's rule, launch_overrides)."""
        chosen = {}
        if options["base_url"]:
            url = urlparse(options["base_url"])
            if url.scheme not in ("http", "https") or not url.netloc:
                raise _bad(f"--base-url must be an http(s) URL, got {options['base_url']!r}")
            chosen["base_url"] = options["base_url"]
        if options["models"]:
            if not all(m.strip() for m in options["models"]):
                raise _bad("--model must not be empty")
            chosen["models"] = [m.strip() for m in options["models"]]
        if options["tools"] is not None:
            chosen["tools"] = [t.strip() for t in options["tools"].split(",") if t.strip()]
        if options["max_iterations"] is not None:
            raw = options["max_iterations"].strip()
            try:
                value = int(raw, 10)
            except ValueError:
                raise _bad(f"--max-iterations must be a positive integer, got {raw!r}") from None
            try:
                chosen["max_iterations"] = check_positive_int("--max-iterations", value)
            except InvalidLimit as exc:
                raise _bad(str(exc)) from None
        if options["first_tool_choice"]:
            chosen["first_tool_choice"] = options["first_tool_choice"]
        return launch_overrides(agent=agent, chosen=chosen)


def render(run: Run, *, as_json: bool) -> str:
    data = run_data(run)
    if as_json:
        return json.dumps(data, indent=None)
    lines = [
        f"Run {data['run_id']}: {data['status']} ({data['stop_reason'] or 'in progress'})",
        f"  {data['stop_detail']}" if data["stop_detail"] else "",
    ]
    for step in data["steps"]:
        lines.append(f"  [{step['iteration']}] {step['model']} {step['finish_reason']} {step['latency_ms']:.0f} ms")
        for call in step["calls"]:
            outcome = "ok" if call["ok"] else (call["error"] or call["status"])
            lines.append(f"      {call['tool']} #{call['args_hash'][:12]} -> {outcome}")
    usage = data["usage"]
    lines.append(f"  tokens {usage['tokens_in']} in / {usage['tokens_out']} out, ${usage['cost_usd']:.6f}")
    if data["answer"]:
        lines.append(f"Answer: {data['answer']}")
    if run.status == Run.Status.AWAITING_APPROVAL:
        lines.append("Waiting for an operator to approve a destructive call (use --approve-all or --reject-all).")
    return "\n".join(line for line in lines if line)
