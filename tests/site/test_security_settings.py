"""Production settings: generated keys private from their first byte and kept apart, HTTPS
cookies and HSTS behind DJANGO_HTTPS=1, a password policy. Settings are read once per process, so
each case starts a fresh Python the way a server would."""
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["SECRET_KEY", "ARGS_HASH_KEY", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS",
         "SECURE_PROXY_SSL_HEADER", "SECURE_SSL_REDIRECT"]
PRINT_SETTINGS = f"""
import json
from django.conf import settings
print(json.dumps({{name: getattr(settings, name, None) for name in {NAMES!r}}}))
"""
# A process that dies at the first chmod: whatever it left behind is what a crash would leave.
DIE_AT_CHMOD = """
import os, pathlib
os.umask(0o000)
def die(*args, **kwargs):
    raise SystemExit("died at chmod")
pathlib.Path.chmod = os.chmod = die
"""


def child_env(data_dir: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "ARGS_HASH_KEY", "SECURE_"))}
    return {**env, "AGENTSITE_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "agentsite.settings", **extra}


def settings_of_a_new_process(data_dir: Path, before: str = "", **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", before + PRINT_SETTINGS], cwd=ROOT, env=child_env(data_dir, **env),
                          capture_output=True, text=True, timeout=120)


def settings_of(data_dir: Path, **env: str) -> dict:
    child = settings_of_a_new_process(data_dir, **env)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_generated_keys_are_private_from_their_first_byte_whatever_the_umask(tmp_path):
    data_dir = tmp_path / "var"
    settings_of_a_new_process(data_dir, before=DIE_AT_CHMOD)  # no chmod is needed: it must not matter
    modes = {path.name: oct(path.stat().st_mode & 0o777) for path in data_dir.iterdir()}
    assert modes == {"secret_key": "0o600", "args_hash_key": "0o600"}
    assert oct(data_dir.stat().st_mode & 0o777) == "0o700"  # nobody else can swap a key file either


def test_the_argument_hash_key_is_its_own_and_survives_a_restart(tmp_path):
    first, second = settings_of(tmp_path), settings_of(tmp_path)
    assert first["ARGS_HASH_KEY"] != first["SECRET_KEY"]
    assert (second["SECRET_KEY"], second["ARGS_HASH_KEY"]) == (first["SECRET_KEY"], first["ARGS_HASH_KEY"])
    assert (tmp_path / "args_hash_key").read_text() == first["ARGS_HASH_KEY"]
    given = settings_of(tmp_path, ARGS_HASH_KEY="from-the-environment")
    assert given["ARGS_HASH_KEY"] == "from-the-environment" and given["SECRET_KEY"] == first["SECRET_KEY"]


def test_plain_http_on_a_laptop_keeps_cookies_usable(tmp_path):
    values = settings_of(tmp_path)
    assert values["SESSION_COOKIE_SECURE"] is False and values["CSRF_COOKIE_SECURE"] is False
    assert values["SECURE_HSTS_SECONDS"] == 0


def test_django_https_turns_on_secure_cookies_and_hsts(tmp_path):
    values = settings_of(tmp_path, DJANGO_HTTPS="1")
    assert values["SESSION_COOKIE_SECURE"] is True and values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_HSTS_SECONDS"] == 31_536_000
    # X-Forwarded-Proto is trusted only when the operator says the proxy sets it.
    assert values["SECURE_PROXY_SSL_HEADER"] is None and values["SECURE_SSL_REDIRECT"] is False
    behind_proxy = settings_of(tmp_path, DJANGO_HTTPS="1", DJANGO_PROXY_SETS_X_FORWARDED_PROTO="1")
    assert behind_proxy["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def deploy_check(data_dir: Path, **env: str) -> subprocess.CompletedProcess:
    env = {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50), **env}
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                          env=child_env(data_dir, **env), capture_output=True, text=True, timeout=300)


@pytest.mark.worker  # manage.py check --deploy in a process of its own
def test_the_deploy_check_passes_under_django_https(tmp_path):
    strict = deploy_check(tmp_path, DJANGO_HTTPS="1", DJANGO_SSL_REDIRECT="1", DJANGO_HSTS_INCLUDE_SUBDOMAINS="1",
                          DJANGO_HSTS_PRELOAD="1")
    assert strict.returncode == 0, strict.stderr
    # With only the switch, what is left is the operator's to choose: subdomains, preload, redirect.
    default = deploy_check(tmp_path, DJANGO_HTTPS="1")
    warned = sorted(line.split(")")[0].split("(")[1] for line in default.stderr.splitlines() if "(security." in line)
    assert warned == ["security.W005", "security.W008", "security.W021"], default.stderr


@pytest.mark.parametrize("password", ["k7#pQ2!xZ", "password1234", "918273645012", "alice-anderson"])
def test_weak_passwords_are_refused(password):
    user = User(username="alice-anderson", first_name="Alice", last_name="Anderson")
    with pytest.raises(ValidationError):
        validate_password(password, user)


def test_a_long_uncommon_password_is_accepted():
    validate_password("correct horse battery staple", User(username="alice"))
