"""Request bodies: DRF's JSON parser, refusing JSON nested too deeply with a 400.

DRF's own parser turns ValueError into a 400 but lets the RecursionError of a body like
"[[[[..." (a hundred thousand levels) through, which is a 500.
"""
import codecs

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json

from hosting.text import loads


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})
        try:
            text = codecs.getreader(encoding)(stream).read()
            return loads(text, parse_constant=json.strict_constant if self.strict else None)
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}")
