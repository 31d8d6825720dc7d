"""Offline demo model: a scripted, OpenAI-compatible chat completions server.

It is NOT a language model (it says so in ``GET /v1/models`` and in its
answers).  Standard library plus h11 (the HTTP/1.1 parser the openai client
already installs), so it can be started in a thread of any process quickly::

    from runs.demo_model import start_server

    server = start_server()          # 127.0.0.1, free port, daemon thread
    server.url                       # "http://127.0.0.1:54321/v1"
    server.latency = 0.05            # seconds added before every response
    server.stop()

or from a shell: ``python -m runs.demo_model --host 127.0.0.1 --port 8765``.

Tests script exact responses with ``POST /v1/scripts`` and then use the model
``script:<id>``; any other model name is the keyword-driven "demo" model.
Modules: :mod:`~runs.demo_model.model` (the endpoints: a request in, a reply out),
:mod:`~runs.demo_model.scripts` (the script entry format),
:mod:`~runs.demo_model.answers` (entries to OpenAI-shaped responses, usage estimate),
:mod:`~runs.demo_model.scenarios` and :mod:`~runs.demo_model.conversation` (the
keyword-driven demo model), :mod:`~runs.demo_model.server` (the HTTP layer; no logic).
"""

from .server import OWNED_BY, DemoModelServer, start_server

__all__ = ["OWNED_BY", "DemoModelServer", "start_server"]
