"""Changes to MCP servers besides discovery (toolsapp.mcp.discovery), and who may run what.

A stdio server's command runs on the web server and on every worker, as the app's user: code
execution on the host. So only a superuser may register or change one with any command; anyone
else with the tools permission only with an executable the host's operator listed in
MCP_STDIO_COMMANDS. The check is made again where the process is started: a command runs only if
it is listed, or if a superuser saved the server with exactly that command (a keyed hash of it,
`command_approval`, that a row written any other way cannot carry).
"""
import hmac

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.crypto import salted_hmac

from toolsapp.models import McpServer, Tool

_APPROVAL_SALT = "toolsapp.mcp.stdio-command"


def command_approval(command: str) -> str:
    return salted_hmac(_APPROVAL_SALT, command, algorithm="sha256").hexdigest()


def stdio_command_listed(argv: list[str]) -> bool:
    """Whether the host's operator listed the executable (the command's first word, as typed)."""
    return bool(argv) and argv[0] in settings.MCP_STDIO_COMMANDS


def stdio_start_refusal(server: McpServer) -> str | None:
    """Why this process must not start `server`'s command, or None when it may."""
    argv = server.argv()
    if stdio_command_listed(argv):
        return None
    if server.command_approval and hmac.compare_digest(server.command_approval, command_approval(server.command)):
        return None
    return (
        f"the command {argv[0]!r} is not in MCP_STDIO_COMMANDS and no superuser saved this server with it; "
        "nothing was started"
    )


def stdio_change_refusal(*, stored: McpServer | None, transport: str, command: str, user) -> str | None:
    """Why `user` may not save a server with this transport and command, or None when they may.
    Other fields (name, enabled) anyone with the tools permission may change: they change
    nothing that runs."""
    if transport != McpServer.Transport.STDIO or getattr(user, "is_superuser", False):
        return None
    if stored is not None and stored.transport == transport and stored.command == command:
        return None
    try:
        argv = McpServer(command=command).argv()
    except ValueError:
        return None  # the model's own check says what is wrong with it
    if stdio_command_listed(argv):
        return None
    listed = ", ".join(settings.MCP_STDIO_COMMANDS) or "none"
    return (
        f"Only a superuser may register the command {argv[0]!r}: it would run on this host. Commands the host's "
        f"operator allows for everyone (MCP_STDIO_COMMANDS): {listed}."
    )


def mcp_server_save(*, server: McpServer, user) -> McpServer:
    """Save a server a form has checked (stdio_change_refusal, and the project the person may put
    it in). A superuser's save approves its stdio command; anyone else's keeps the approval there
    was, which matches only the command it was made for. Its tools are in its project: a server
    moved to another project (or made shared) takes its discovered tools along."""
    if server.transport == McpServer.Transport.STDIO and getattr(user, "is_superuser", False):
        server.command_approval = command_approval(server.command)
    with transaction.atomic():
        server.save()
        tools_follow_server(server)
    return server


def tools_follow_server(server: McpServer) -> int:
    """Put the server's tools in its project (those elsewhere); how many moved."""
    elsewhere = Tool.objects.filter(mcp_server=server)
    if server.project_id is None:
        elsewhere = elsewhere.filter(project__isnull=False)
    else:
        elsewhere = elsewhere.filter(Q(project__isnull=True) | ~Q(project_id=server.project_id))
    return elsewhere.update(project_id=server.project_id, updated_at=timezone.now())


def mcp_server_delete(*, server: McpServer) -> list[str]:
    """Delete a server and disable its enabled tools; the names of the tools it disabled.

    The tools stay: agents list them and past runs name them. Nothing can run them any more, so
    they are disabled (an agent that still lists one cannot start a run until an admin removes
    or replaces it) rather than left to fail on every call.
    """
    with transaction.atomic():
        tools = list(Tool.objects.select_for_update().filter(mcp_server=server, enabled=True).order_by("name"))
        Tool.objects.filter(pk__in=[tool.pk for tool in tools]).update(enabled=False, updated_at=timezone.now())
        server.delete()  # its tools' mcp_server becomes empty (SET_NULL)
    return [tool.name for tool in tools]


def deletion_summary(server_name: str, disabled: list[str]) -> str:
    """What the operator reads after deleting a server."""
    if not disabled:
        return f"MCP server {server_name} deleted; it had no enabled tools."
    count = f"{len(disabled)} tool{'s' if len(disabled) != 1 else ''}"
    return f"MCP server {server_name} deleted; {count} disabled: {', '.join(disabled)}."
