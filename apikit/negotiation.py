"""Content negotiation: `?format=json` (or `openapi`, on /api/schema/) picks a renderer as DRF
does; a format nobody renders is ignored and the Accept header decides, where DRF answers a 404
("Not found."), which reads as "no such object" (found by the API fuzz). An export answers its
file whatever the client accepts."""
from rest_framework.negotiation import BaseContentNegotiation, DefaultContentNegotiation


class UnknownFormatIgnored(DefaultContentNegotiation):
    def filter_renderers(self, renderers, format):
        return [renderer for renderer in renderers if renderer.format == format] or renderers


class IgnoreAcceptHeader(BaseContentNegotiation):
    """The export answers a file whatever the client accepts (errors are JSON)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type

    def select_parser(self, request, parsers):
        return parsers[0]
