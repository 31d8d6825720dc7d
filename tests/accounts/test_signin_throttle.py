"""Password guessing: after too many failures in a window, sign-in is refused, even with the right
password, on the login page and on the API's token endpoint, until the window has passed."""

from html import unescape

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts import signin_throttle

WINDOW = 900


@pytest.fixture(autouse=True)
def limits(settings):
    settings.SIGNIN_WINDOW_SECONDS = WINDOW
    settings.SIGNIN_FAILURES_PER_USERNAME = 5
    settings.SIGNIN_FAILURES_PER_IP = 20


@pytest.fixture
def clock(monkeypatch):
    """The throttle's clock, moved by hand: no test waits for a window to pass."""
    now = [1_800_000_000.0]
    monkeypatch.setattr(signin_throttle, "_now", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def token_attempt(username: str, password: str, ip: str = "127.0.0.1"):
    return APIClient(REMOTE_ADDR=ip).post("/api/v1/token/", {"username": username, "password": password}, format="json")


def login_attempt(username: str, password: str):
    client = Client()
    return client, client.post("/login/", {"username": username, "password": password})


def test_the_sixth_api_sign_in_is_refused_even_with_the_right_password(alice, bob, clock):
    assert [token_attempt("alice", f"guess-{n}").status_code for n in range(5)] == [400] * 5
    refused = token_attempt("alice", "pw-alice")
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith("Too many failed sign-in attempts")
    assert 0 < int(refused["Retry-After"]) <= WINDOW
    assert token_attempt("bob", "pw-bob").status_code == 200  # another account from the same address

    clock(WINDOW)
    assert token_attempt("alice", "pw-alice").status_code == 200


def test_the_sixth_login_is_refused_even_with_the_right_password(alice, clock):
    for n in range(5):
        _, response = login_attempt("alice", f"guess-{n}")
        assert response.status_code == 200 and "didn't match" in unescape(response.content.decode())
    client, refused = login_attempt("alice", "pw-alice")
    assert refused.status_code == 429
    assert "Too many failed sign-in attempts" in refused.content.decode()
    assert "_auth_user_id" not in client.session

    clock(WINDOW)
    client, response = login_attempt("alice", "pw-alice")
    assert response.status_code == 302 and "_auth_user_id" in client.session


def test_failures_on_the_page_and_the_api_add_up(alice, clock):
    for n in range(3):
        login_attempt("alice", f"guess-{n}")
    for n in range(2):
        token_attempt("alice", f"guess-{n}")
    assert token_attempt("alice", "pw-alice").status_code == 429
    assert login_attempt("alice", "pw-alice")[1].status_code == 429


def test_one_address_trying_many_usernames_is_refused(alice, settings, clock):
    settings.SIGNIN_FAILURES_PER_IP = 3
    for name in ("root", "admin", "operator"):
        assert token_attempt(name, "password").status_code == 400
    assert token_attempt("alice", "pw-alice").status_code == 429
    assert token_attempt("alice", "pw-alice", ip="192.0.2.7").status_code == 200  # someone else


def test_a_forged_x_forwarded_for_does_not_dodge_the_address_limit(alice, settings, clock):
    """No proxy is trusted by default: each attempt naming another X-Forwarded-For address still
    counts against the connection's address."""
    settings.SIGNIN_FAILURES_PER_IP = 3
    for n, name in enumerate(("root", "admin", "operator")):
        forged = APIClient(REMOTE_ADDR="198.51.100.9", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
        assert forged.post("/api/v1/token/", {"username": name, "password": "x"}, format="json").status_code == 400
    again = APIClient(REMOTE_ADDR="198.51.100.9", HTTP_X_FORWARDED_FOR="203.0.113.99")
    assert again.post("/api/v1/token/", {"username": "alice", "password": "pw-alice"}, format="json").status_code == 429


def test_behind_a_trusted_proxy_the_address_it_saw_is_counted(alice, settings, clock):
    settings.SIGNIN_FAILURES_PER_IP = 3
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    for name in ("root", "admin", "operator"):
        # The client's own claim comes first; the proxy appends the address it saw.
        via_proxy = APIClient(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="1.2.3.4, 192.0.2.50")
        assert via_proxy.post("/api/v1/token/", {"username": name, "password": "x"}, format="json").status_code == 400
    other = APIClient(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="1.2.3.4, 192.0.2.51")
    assert other.post("/api/v1/token/", {"username": "alice", "password": "pw-alice"}, format="json").status_code == 200
    same = APIClient(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="9.9.9.9, 192.0.2.50")
    assert same.post("/api/v1/token/", {"username": "alice", "password": "pw-alice"}, format="json").status_code == 429


def test_fewer_failures_than_the_limit_still_let_the_right_password_in(alice, clock):
    for n in range(4):
        token_attempt("alice", f"guess-{n}")
    assert token_attempt("alice", "pw-alice").status_code == 200


def test_with_redis_away_people_still_sign_in_and_a_wrong_password_is_still_refused(alice, settings, caplog):
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
    }  # nothing listens there
    assert token_attempt("alice", "wrong").status_code == 400
    assert token_attempt("alice", "pw-alice").status_code == 200
    client, response = login_attempt("alice", "pw-alice")
    assert response.status_code == 302 and "_auth_user_id" in client.session
    assert "sign-in throttle unavailable" in caplog.text


@pytest.mark.parametrize(
    ("forwarded", "expected"),
    [
        ("", "10.0.0.2"),
        ("203.0.113.9", "10.0.0.2"),  # one hop behind two trusted proxies: the client wrote it
        ("192.0.2.50, 10.0.0.1", "192.0.2.50"),  # outer proxy saw 192.0.2.50, inner saw the outer
        ("203.0.113.9, 192.0.2.50, 10.0.0.1", "192.0.2.50"),  # the client's own claim first
    ],
)
def test_the_client_address_is_the_connections_unless_every_trusted_proxy_added_a_hop(settings, forwarded, expected):
    from django.test import RequestFactory

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 2}
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)
    assert signin_throttle.client_ip(request) == expected


def test_a_forged_hop_shorter_than_the_trusted_proxies_does_not_dodge_the_address_limit(alice, settings, clock):
    """Two proxies are trusted but the request came past only one hop (or straight to the inner
    proxy): the header's single address is the client's own claim, the connection's is counted."""
    settings.SIGNIN_FAILURES_PER_IP = 3
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 2}
    for n, name in enumerate(("root", "admin", "operator")):
        forged = APIClient(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
        assert forged.post("/api/v1/token/", {"username": name, "password": "x"}, format="json").status_code == 400
    again = APIClient(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.99")
    assert again.post("/api/v1/token/", {"username": "alice", "password": "pw-alice"}, format="json").status_code == 429
