"""Every websocket route is opened only by a page of the site's own origin: scheme, host and port.

A browser sends a host's cookies to every port of it, so a page served from another port of the
same host carries the person's session; it must not open their approvals socket and decide. Over
the real ASGI application with a signed-in session, as a browser would send the handshake."""
import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentsite.asgi import application
from runs.models import Approval
from tests.support.approval_fixtures import pending_approval
from tests.web.websockets.test_consumer_approvals import CONNECT_TIMEOUT, DEMO_TASK, _fresh_layer  # noqa: F401

ROUTES = ["/ws/approvals/", "/ws/runs/{run_id}/"]


@pytest.fixture
def waiting(launch, alice, no_dispatch):
    """A run waiting for alice's decision, and alice's session cookie."""
    run = launch(DEMO_TASK, approval_policy="ask")
    client = Client()
    client.force_login(alice)
    return run, f"sessionid={client.cookies['sessionid'].value}"


def handshake(path: str, cookie: str, *, origin: str, host: str, scheme: str = "ws", extra=()) -> WebsocketCommunicator:
    headers = [(b"origin", origin.encode()), (b"host", host.encode()), (b"cookie", cookie.encode()),
               *((name.encode(), value.encode()) for name, value in extra)]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    communicator.scope["scheme"] = scheme  # what the server (daphne) says the connection is
    return communicator


def opens(path: str, cookie: str, **handshake_of) -> bool:
    async def body():
        communicator = handshake(path, cookie, **handshake_of)
        connected, _ = await communicator.connect(timeout=CONNECT_TIMEOUT)
        await communicator.disconnect()
        return connected

    return async_to_sync(body)()


def test_a_page_on_another_port_of_the_same_host_opens_no_socket_and_decides_nothing(waiting):
    run, cookie = waiting
    approval = pending_approval(run)

    async def decide_from_another_port():
        communicator = handshake("/ws/approvals/", cookie, origin="http://localhost:8001", host="localhost:8000")
        connected, _ = await communicator.connect(timeout=CONNECT_TIMEOUT)
        if connected:  # before the fix: in, with the person's session
            await communicator.send_json_to({"type": "decide", "approval_id": approval.pk, "approve": True})
            await communicator.receive_json_from(timeout=CONNECT_TIMEOUT)
        await communicator.disconnect()
        return connected

    assert async_to_sync(decide_from_another_port)() is False
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.decided_by is None
    timeline = f"/ws/runs/{run.pk}/"
    assert not opens(timeline, cookie, origin="http://localhost:8001", host="localhost:8000")
    # The site's own page, on the port ./start serves (and the browser tests' live server's).
    assert opens("/ws/approvals/", cookie, origin="http://127.0.0.1:8000", host="127.0.0.1:8000")
    assert opens(timeline, cookie, origin="http://localhost:8000", host="localhost:8000")


@pytest.mark.parametrize("route", ROUTES)
def test_the_origin_must_be_the_sockets_own_scheme_host_and_port(waiting, route, settings):
    run, cookie = waiting
    path = route.format(run_id=run.pk)
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "agents.example.com"]

    def opened(origin, host, scheme="ws", extra=()):
        return opens(path, cookie, origin=origin, host=host, scheme=scheme, extra=extra)

    assert opened("http://localhost", "localhost")
    assert opened("http://localhost", "localhost:80")  # a default port, said or not, is that port
    assert opened("https://localhost:443", "localhost", scheme="wss")
    assert not opened("http://localhost:8080", "localhost")  # another port
    assert not opened("https://localhost", "localhost")  # a page over https, the socket plain ws
    assert not opened("http://localhost", "localhost", scheme="wss")
    assert not opened("http://127.0.0.1", "localhost")  # another host
    assert not opened("http://evil.example", "evil.example")  # a host not in ALLOWED_HOSTS
    assert not opened("null", "localhost")

    # Behind a proxy that ends TLS: the socket reaches daphne as plain ws.
    page, host = "https://agents.example.com", "agents.example.com"
    assert not opened(page, host)
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert opened(page, host, extra=[("x-forwarded-proto", "https")])
    assert not opened(page, host, extra=[("x-forwarded-proto", "http")])
    settings.SECURE_PROXY_SSL_HEADER = None
    settings.CSRF_TRUSTED_ORIGINS = ["https://agents.example.com:8443"]
    assert not opened(page, host)  # trusted on another port only
    settings.CSRF_TRUSTED_ORIGINS = ["https://agents.example.com"]
    assert opened(page, host)
    settings.CSRF_TRUSTED_ORIGINS = ["https://*.example.com"]
    assert opened(page, host) and not opened("http://agents.example.com", host, scheme="wss")
