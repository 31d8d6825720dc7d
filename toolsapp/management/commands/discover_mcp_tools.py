from django.core.management.base import BaseCommand, CommandError

from toolsapp.mcp.discovery import mcp_server_discover
from toolsapp.models import McpServer


class Command(BaseCommand):
    help = "Discover the tools of MCP servers and store them in the tool registry."

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", metavar="NAME", help="MCP servers to discover")
        parser.add_argument("--all", action="store_true", help="every enabled MCP server")

    def handle(self, *args, names, all, **options):
        if all == bool(names):
            raise CommandError("name one or more MCP servers, or pass --all")
        if all:
            servers = list(McpServer.objects.filter(enabled=True))
        else:
            servers = list(McpServer.objects.filter(name__in=names))
            missing = sorted(set(names) - {server.name for server in servers})
            if missing:
                raise CommandError(f"no MCP server named {', '.join(missing)}")
        failed = []
        for server in servers:
            result = mcp_server_discover(server=server)
            self.stdout.write(result.summary())
            for label, names_ in (("added", result.added), ("updated", result.updated), ("disabled", result.disabled)):
                for name in names_:
                    self.stdout.write(f"  {label}: {name}")
            for remote_name, reason in result.refused:
                self.stdout.write(f"  refused: {remote_name}: {reason}")
            if not result.ok:
                failed.append(server.name)
        if failed:
            raise CommandError(f"discovery failed for {', '.join(failed)}")
