"""Fixtures the fault-matrix tests share with the websocket tests."""
from tests.web.websockets.test_consumer_timeline import finished_run, session_cookie  # noqa: F401
