"""Content negotiation: `?format=json` (or `openapi`, on /api/schema/) picks a renderer as DRF
does; a format nobody renders is ignored and the Accept header decides, where DRF answers a 404
("Not found."), which reads as "no such object" (found by the API fuzz)."""
from rest_framework.negotiation import DefaultContentNegotiation


class UnknownFormatIgnored(DefaultContentNegotiation):
    def filter_renderers(self, renderers, format):
        return [renderer for renderer in renderers if renderer.format == format] or renderers
