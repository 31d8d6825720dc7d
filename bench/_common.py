"""Helpers shared by the benchmarks: Django setup and a demo model in its own process."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django(db_path: str | None = None) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    if db_path and not os.environ.get("DATABASE_URL"):
        os.environ["SQLITE_PATH"] = db_path
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_demo_model(latency: float = 0.0) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "runs.demo_model", "--port", str(port), "--latency", str(latency)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}/v1"
