"""Outgoing HTTP to addresses an admin typed (HTTP tools, webhooks, MCP servers), guarded
against server-side request forgery.

The host is resolved before connecting, and the request is refused when any address it resolves
to is loopback, private, link-local (cloud metadata lives there), shared, multicast or otherwise
not public, unless `OUTBOUND_ALLOWLIST` names it. The connection then goes to the address that was
checked (so a second DNS answer cannot swap in another one), with the original name for the Host
header and TLS. An IPv6 address that embeds an IPv4 one (NAT64, 6to4, Teredo, IPv4-mapped or
-compatible) is judged as that IPv4 address. Redirects are followed only when they keep the method
(307/308), each hop checked the same way, and credentials never follow one to another origin; any
other redirect is refused.
"""
import http.client
import ipaddress
import json
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpcore2
import httpx2
from django.conf import settings

from hosting.text import JsonTooDeep
from hosting.text import loads as bounded_loads
from toolsapp.outbound_rules import NAT64_LOCAL, allowlist_errors, embedded_ipv4, split_host_port

USER_AGENT = "agentsite/1"


class Blocked(ValueError):
    """The URL may not be requested; nothing was sent."""


class OutboundError(Exception):
    """The request was allowed but did not produce a usable response."""


@dataclass
class Response:
    url: str
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        try:
            return bounded_loads(self.body)
        except JsonTooDeep as exc:
            raise OutboundError(f"the response from {self.url} is {exc}") from None
        except (ValueError, UnicodeDecodeError):
            raise OutboundError(f"the response from {self.url} is not JSON") from None


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with the query
    address: str  # the checked IP address to connect to


def _allowlisted(host: str, port: int, ip, allowlist: list[str]) -> bool:
    """Entries: a host name or IP ("tools.internal", "10.0.0.5", "::1"), the same with a port
    ("127.0.0.1:9000", "[::1]:9000"), or a network ("10.1.0.0/16"). An IPv6 address that leads to
    an IPv4 one (see embedded_ipv4) is also allowed by the entries naming that IPv4 address.
    Entries are checked when the settings load; one that is still malformed (changed at run time)
    refuses the request rather than being skipped."""
    problems = allowlist_errors(allowlist)
    if problems:
        raise Blocked(f"OUTBOUND_ALLOWLIST is malformed: {'; '.join(problems)}")
    addresses = [ip, *embedded_ipv4(ip)]
    for entry in (e.strip().lower() for e in allowlist):
        if "/" in entry:
            network = ipaddress.ip_network(entry, strict=False)
            if any(address in network for address in addresses if address.version == network.version):
                return True
            continue
        name, entry_port = split_host_port(entry)
        if entry_port is not None and entry_port != str(port):
            continue
        if name in (host.lower(), *(str(address) for address in addresses)):
            return True
    return False


def _public(ip) -> bool:
    """Only a global unicast address; an IPv6 address that embeds IPv4 ones counts as those."""
    if ip in NAT64_LOCAL:
        return False
    embedded = embedded_ipv4(ip)
    if embedded:
        return all(_public(address) for address in embedded)
    return ip.is_global and not ip.is_multicast


def check_url(url: str) -> Target:
    """Resolve and check a URL; raise Blocked (with the reason) when it may not be requested."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Blocked(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise Blocked("only http and https URLs are allowed")
    if parts.username or parts.password:
        raise Blocked("credentials in the URL are not allowed")
    host = parts.hostname
    if not host:
        raise Blocked("the URL has no host")
    port = port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(scheme=parts.scheme, host=host, port=port, path=path, address=checked_addresses(host, port)[0])


def checked_addresses(host: str, port: int) -> list[str]:
    """Resolve `host`; its addresses if every one may be reached, else raise Blocked."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Blocked(f"the host {host!r} could not be resolved ({exc})") from None
    addresses = []
    for info in infos:
        ip = ipaddress.ip_address(info[4][0].split("%")[0])
        if not _public(ip) and not _allowlisted(host, port, ip, settings.OUTBOUND_ALLOWLIST):
            raise Blocked(
                f"{host} resolves to {ip}, a private, loopback, link-local or reserved address; "
                "add it to OUTBOUND_ALLOWLIST if this server is meant to be reached"
            )
        addresses.append(str(ip))
    return addresses


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Target, timeout: float):
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = target.address

    def connect(self):
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Target, timeout: float):
        super().__init__(target.host, target.port, timeout=timeout, context=ssl.create_default_context())
        self._address = target.address

    def connect(self):
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


class _CheckedNetwork(httpcore2.NetworkBackend):
    """Resolves and checks every host when it connects, and connects to the address it checked.

    For long-lived clients (a thread's model client): the check cannot go stale, redirects to
    another host are checked too, and a second DNS answer cannot swap in another address.
    """

    def __init__(self):
        self._network = httpcore2.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            addresses = checked_addresses(host, port)
        except Blocked as exc:
            raise httpcore2.ConnectError(f"refused: {exc}") from None
        for position, address in enumerate(addresses):  # e.g. an IPv6 address first on an IPv4-only host
            try:
                return self._network.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore2.ConnectError:
                if position == len(addresses) - 1:
                    raise

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore2.ConnectError("unix sockets are not allowed")

    def sleep(self, seconds: float) -> None:
        self._network.sleep(seconds)


def _transport_over(network, ssl_context: ssl.SSLContext):
    """An httpx transport (sync or async, as `network` is) whose connections all go through `network`.

    httpx2 (pinned in requirements.txt) takes no network backend, so the transport's pool is
    swapped for one that has ours; the rest (request mapping, errors) stays the library's. No
    proxy from the environment: a proxy would resolve the name itself, past the guard.
    """
    if isinstance(network, httpcore2.AsyncNetworkBackend):
        transport_class, pool_class = httpx2.AsyncHTTPTransport, httpcore2.AsyncConnectionPool
    else:
        transport_class, pool_class = httpx2.HTTPTransport, httpcore2.ConnectionPool
    transport = transport_class(verify=ssl_context, trust_env=False)
    transport._pool = pool_class(ssl_context=ssl_context, network_backend=network)
    return transport


def checked_transport(ssl_context: ssl.SSLContext) -> httpx2.HTTPTransport:
    """An httpx transport whose every connection goes through the guard (see _CheckedNetwork)."""
    return _transport_over(_CheckedNetwork(), ssl_context)


class _PinnedNetwork(httpcore2.AsyncNetworkBackend):
    """Connects an async HTTP client only to the address `check_url` approved, whatever a
    second DNS answer would say (DNS rebinding), and to no other host or port."""

    def __init__(self, target: Target):
        self._target = target
        try:
            self._host = target.host.encode("idna").decode("ascii").lower()
        except UnicodeError:
            self._host = target.host.lower()
        self._network = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        if host.lower() != self._host or port != self._target.port:
            raise httpcore2.ConnectError(f"{host}:{port} is not the checked address of {self._target.host}")
        return await self._network.connect_tcp(
            self._target.address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore2.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


def pinned_async_client(url: str, *, timeout: float) -> httpx2.AsyncClient:
    """An async HTTP client for `url` (checked first; raises Blocked) that can reach nothing else.

    For libraries that bring their own HTTP calls (the MCP SDK): a check of the URL alone would
    let them resolve the name again when they connect.
    """
    # httpx's own CA bundle, as the SDK's default client had.
    transport = _transport_over(_PinnedNetwork(check_url(url)), httpx2.create_ssl_context())
    return httpx2.AsyncClient(transport=transport, timeout=timeout, trust_env=False)


def encode_json(payload) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def post_json(url: str, payload, **options) -> Response:
    """POST `payload` as JSON (see post_bytes)."""
    return post_bytes(url, encode_json(payload), **options)


def post_bytes(
    url: str,
    body: bytes,
    *,
    timeout: float,
    max_bytes: int | None = None,
    headers: dict[str, str] | None = None,
    max_redirects: int | None = None,
    secrets: tuple[str, ...] = (),
) -> Response:
    """POST a JSON body. Raises Blocked before sending anything to a refused address, and
    OutboundError for timeouts, oversized responses, refused redirects and network failures.

    `secrets`: values that must reach only the first URL's origin (scheme, host and port). A
    redirect to another origin drops the credential headers and any header holding a secret,
    and is refused when the body (re-sent by a 307/308) holds one."""
    max_bytes = settings.TOOL_HTTP_MAX_RESPONSE_BYTES if max_bytes is None else max_bytes
    max_redirects = settings.TOOL_HTTP_MAX_REDIRECTS if max_redirects is None else max_redirects
    deadline = time.monotonic() + timeout
    headers = dict(headers or {})
    origin = None
    for _hop in range(max_redirects + 1):
        target = check_url(url)
        if origin is None:
            origin = _origin(target)
        elif _origin(target) != origin:
            headers = _without_credentials(headers, secrets)
            if any(secret.encode() in body for secret in secrets if secret):
                raise OutboundError(
                    f"a redirect to {target.host} was not followed: the request body holds a secret meant "
                    f"only for {origin[1]}"
                )
        response = _send(target, url, body, headers, deadline, max_bytes)
        if response.status in (307, 308):
            location = response.headers.get("location")
            if not location:
                raise OutboundError(f"{url} answered {response.status} without a Location")
            url = urljoin(url, location)
            continue
        if 300 <= response.status < 400:
            raise OutboundError(
                f"{url} answered a {response.status} redirect, which would turn the POST into a GET; not followed"
            )
        return response
    raise OutboundError(f"more than {max_redirects} redirects")


# Headers that carry credentials; like browsers and HTTP libraries, never sent to another origin.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


def _origin(target: Target) -> tuple[str, str, int]:
    return target.scheme, target.host.lower().rstrip("."), target.port


def _without_credentials(headers: dict[str, str], secrets: tuple[str, ...]) -> dict[str, str]:
    return {
        name: value for name, value in headers.items()
        if name.lower() not in CREDENTIAL_HEADERS and not any(secret and secret in value for secret in secrets)
    }


def _send(target: Target, url: str, body: bytes, headers: dict, deadline: float, max_bytes: int) -> Response:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise OutboundError(f"timed out: no answer from {url} within the timeout")
    connection_class = _PinnedHTTPSConnection if target.scheme == "https" else _PinnedHTTPConnection
    connection = connection_class(target, timeout=remaining)
    try:
        connection.request(
            "POST", target.path, body=body,
            headers={"Content-Type": "application/json", "Accept": "application/json", "User-Agent": USER_AGENT,
                     **headers},
        )
        reply = connection.getresponse()
        chunks, size = [], 0
        while True:
            if time.monotonic() > deadline:
                raise OutboundError(f"timed out: no complete answer from {url} within the timeout")
            chunk = reply.read1(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise OutboundError(f"the response from {url} is larger than {max_bytes} bytes")
            chunks.append(chunk)
        return Response(
            url=url, status=reply.status, headers={k.lower(): v for k, v in reply.getheaders()}, body=b"".join(chunks)
        )
    except TimeoutError:
        raise OutboundError(f"timed out: no answer from {url} within the timeout") from None
    except (OSError, http.client.HTTPException) as exc:
        raise OutboundError(f"could not reach {url}: {type(exc).__name__}: {exc}") from None
    finally:
        connection.close()
