"""What a model server's answer may make a worker hold: at most LLM_MAX_RESPONSE_BYTES (counted
after decompression, so a small gzip bomb does not count as small) and JSON at most
MAX_JSON_DEPTH levels deep; and a body that is not what its Content-Encoding says (labelled gzip,
sent plain) is refused in words rather than raised as the HTTP client's own decoding error.

Installed as a response hook on the model client's HTTP client: the hook runs before the body
is read and wraps its stream, so an oversized body stops being read at the cap. The error is an
openai.APIError, which the client raises as is (no retry: the same server would send the same
body) and the model client records as that model's failure.
"""
import openai
from django.conf import settings
from httpx2 import DecodingError, Response, SyncByteStream
from httpx2._decoders import MultiDecoder

from hosting.text import MAX_JSON_DEPTH, text_nested_deeper_than


class ModelResponseRefused(openai.APIError):
    """The model server's answer is too large, nested too deeply, or not decodable as labelled."""

    def __init__(self, message: str, request):
        super().__init__(message, request, body=None)


def _too_large(limit: int) -> str:
    return f"the answer is larger than {limit} bytes (LLM_MAX_RESPONSE_BYTES)"


class _CappedStream(SyncByteStream):
    """The decoded body, refused past `limit` bytes or when nested too deeply."""

    def __init__(self, raw: SyncByteStream, encodings: list[str], limit: int, request):
        self.raw, self.encodings, self.limit, self.request = raw, encodings, limit, request
        self.decoder = MultiDecoder(encodings)

    def __iter__(self):
        try:
            yield from self._decoded()
        except DecodingError as exc:
            # Not a transport failure (the bytes all arrived): the server sent what it did not say.
            labelled = ", ".join(self.encodings) or "identity"
            raise ModelResponseRefused(
                f"the answer could not be decoded (labelled Content-Encoding: {labelled}): {exc}", self.request
            ) from exc

    def _decoded(self):
        chunks, size = [], 0

        def take(parts):
            nonlocal size
            for part in parts:
                size += len(part)
                if size > self.limit:
                    raise ModelResponseRefused(_too_large(self.limit), self.request)
                chunks.append(part)
                yield part

        for raw in self.raw:
            yield from take(self.decoder.decode(raw))
        yield from take(self.decoder.flush())
        # Checked before the client parses it: Python's json raises RecursionError, not ValueError.
        if text_nested_deeper_than(b"".join(chunks)):
            raise ModelResponseRefused(f"the answer is JSON nested deeper than {MAX_JSON_DEPTH} levels", self.request)

    def close(self):
        self.raw.close()


def cap_response(response: Response) -> None:
    """httpx2 response hook: refuse a declared oversize at once, cap the rest while reading."""
    limit = settings.LLM_MAX_RESPONSE_BYTES
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ModelResponseRefused(_too_large(limit), response.request)
    encodings = [e.strip().lower() for e in response.headers.get_list("content-encoding", split_commas=True)]
    # Decoded here, counted decoded: the response must not decode it again.
    response.headers.pop("content-encoding", None)
    response.stream = _CappedStream(response.stream, encodings, limit, response.request)
