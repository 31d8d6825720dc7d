import json
import shlex

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from toolsapp.executors import kind_choices


class ToolKinds:
    """The built-in kinds' values, for the code that names one (discovery makes MCP tools).
    Every kind, its label and its rules are declared by its executor (toolsapp/executors/);
    `choices` and `values` read them."""

    PYTHON, HTTP, MCP = "python", "http", "mcp"

    @property
    def choices(self) -> list[tuple[str, str]]:
        return kind_choices()

    @property
    def values(self) -> list[str]:
        return [value for value, _ in kind_choices()]


class Tool(models.Model):
    Kind = ToolKinds()

    name = models.CharField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="The team whose tool it is; empty: shared by the site, for every project's agents.",
    )
    parameters = models.JSONField(default=dict, help_text="JSON Schema (Draft 2020-12) of the arguments.")
    destructive = models.BooleanField(default=False, help_text="Every call needs an operator's approval.")
    always_ask = models.BooleanField(
        default=False, help_text="Destructive calls always go to a person: rules, grants and policies never approve them."
    )
    critical = models.BooleanField(
        default=False, help_text="Destructive calls need two different people's approval, neither the run's launcher."
    )
    allow_argument_edits = models.BooleanField(
        default=True, help_text="Operators may edit a call's arguments before approving it."
    )
    parallel_safe = models.BooleanField(default=True, help_text="May run at the same time as other calls.")
    idempotent = models.BooleanField(
        default=True, help_text="Safe to re-run with the same idempotency key after a crash."
    )
    in_experiments = models.CharField(
        max_length=8, choices=[  # the engine decides "auto": runs/engine/tools/simulation.py
            ("auto", "Runs only if it just reads (a read-only handler, idempotent, not destructive); else simulated"),
            ("real", "Runs for real in experiments (never a destructive tool)"),
            ("never", "Never runs in experiments"),
        ], default="auto",
        help_text="What a call of this tool does when a dataset's cases run in an experiment: a simulated call changes nothing.",
    )
    timeout_seconds = models.FloatField(default=30.0, validators=[MinValueValidator(0.01)])
    repeat_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Identical calls allowed per run; empty uses the agent's."
    )
    sensitive_fields = models.JSONField(default=list, blank=True, help_text="Argument names masked in the UI.")
    # The decision moment (runs/supervision/evidence/: sources.py, twins.py, state_checks.py; runs/engine/tools/prior_reads.py).
    identifier_fields = models.JSONField(
        default=list, blank=True,
        help_text="Argument names that say which thing a call acts on (order_id): calls with the same values are "
        "twins. Empty: all arguments.",
    )
    state_check = models.JSONField(
        default=dict, blank=True,
        help_text='A read-only tool run before a person decides, and its arguments from the call: '
        '{"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}}. Empty: none.',
    )
    requires_read = models.JSONField(
        default=dict, blank=True,
        help_text='A read that must have happened earlier in the run, with the same values: '
        '{"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}}. Empty: none.',
    )
    reads_outside_content = models.BooleanField(
        default=False,
        help_text="Its results hold content from outside (web pages, e-mails, tickets anyone writes): values "
        "taken from them are marked. HTTP and MCP tools always count as such.",
    )
    # Choices from the executors' declarations: a callable, so a new kind needs no migration.
    kind = models.CharField(max_length=16, choices=kind_choices, default=Kind.PYTHON)
    handler = models.CharField(max_length=200, blank=True, help_text="Registered handler name (python tools).")
    config = models.JSONField(default=dict, blank=True, help_text="Source settings (URL, the MCP server's tool name).")
    # Deleting a server keeps its tools (agents and past runs name them): mcp_server_delete
    # disables them first, and the pages show that their server is gone.
    mcp_server = models.ForeignKey(
        "McpServer", null=True, blank=True, on_delete=models.SET_NULL, related_name="tools",
        help_text="MCP tools: the server they were discovered on.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def definition(self) -> dict:
        """The tool as the OpenAI chat completions API expects it."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class McpServer(models.Model):
    """An MCP server whose tools are discovered into the registry (as Tool rows of kind "mcp")."""

    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio (a local command)"
        HTTP = "http", "Streamable HTTP (a URL)"

    # Short enough that "<server>__<tool>" still fits the API's 64-character function names.
    name = models.CharField(
        max_length=32, unique=True,
        validators=[RegexValidator(r"^[a-z0-9][a-z0-9_-]*$", "Lower-case letters, digits, _ and -.")],
        help_text="Prefix of its tools' names: <name>__<tool>.",
    )
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="The team whose server it is (its tools are that project's); empty: shared by the site.",
    )
    transport = models.CharField(max_length=8, choices=Transport.choices, default=Transport.STDIO)
    command = models.TextField(
        blank=True,
        help_text="stdio: the command line, split like a shell does (no shell runs it), "
        'or a JSON list such as ["python", "-m", "my_server"].',
    )
    url = models.URLField(max_length=500, blank=True, help_text="Streamable HTTP: the endpoint, e.g. https://host/mcp.")
    # A keyed hash of `command`, written when a superuser saves a stdio server: a process starts a
    # command only if it is in MCP_STDIO_COMMANDS or matches this (toolsapp.mcp.services).
    command_approval = models.CharField(max_length=64, blank=True, editable=False)
    enabled = models.BooleanField(default=True)
    last_discovered_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self):
        return self.name

    def argv(self) -> list[str]:
        """The stdio command as an argument list; ValueError when it cannot be parsed."""
        text = self.command.strip()
        if text.startswith("["):
            argv = json.loads(text)
            if not isinstance(argv, list) or not all(isinstance(part, str) for part in argv):
                raise ValueError("a JSON command must be a list of strings")
        else:
            argv = shlex.split(text)
        if not argv or not argv[0]:
            raise ValueError("the command is empty")
        return argv

    def clean(self):
        if self.transport == self.Transport.STDIO:
            try:
                self.argv()
            except ValueError as exc:
                raise ValidationError({"command": f"Not a usable command: {exc}"}) from None
        elif not self.url:
            raise ValidationError({"url": "A Streamable HTTP server needs its URL."})


# --- Data of the built-in demo tools -----------------------------------------------------------


class WeatherReport(models.Model):
    city = models.CharField(max_length=100, unique=True)
    temperature_c = models.FloatField()
    conditions = models.CharField(max_length=100)

    def __str__(self):
        return self.city


class Ticket(models.Model):
    class Priority(models.TextChoices):
        LOW = "low"
        MEDIUM = "medium"
        HIGH = "high"

    title = models.CharField(max_length=200)
    body = models.TextField()
    priority = models.CharField(max_length=10, choices=Priority.choices)
    idempotency_key = models.CharField(max_length=64, unique=True, null=True, blank=True)
    created_by_run = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"#{self.pk} {self.title}"


class Order(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        SHIPPED = "shipped"
        CANCELLED = "cancelled"

    order_id = models.CharField(max_length=32, unique=True)
    customer = models.CharField(max_length=100)
    item = models.CharField(max_length=200)
    total = models.DecimalField(max_digits=10, decimal_places=2)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    cancel_reason = models.TextField(blank=True)
    cancel_idempotency_key = models.CharField(max_length=64, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return self.order_id
