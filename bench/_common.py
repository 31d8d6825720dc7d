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


def cpu_seconds(pids, *, kernel_only: bool = False) -> float:
    """CPU seconds used so far by the given processes (Linux /proc): user + system time, or only
    the time spent in the kernel."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user, kernel = int(fields[11]), int(fields[12])
        total += (kernel if kernel_only else user + kernel) / tick
    return total


def pids_named(*names: str) -> list[int]:
    """Processes whose command name is one of `names` (e.g. postgres, redis-server)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in names:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def resident_mb(pid: int) -> tuple[float, float]:
    """(resident memory now, its peak since the process started) in MB, from /proc/<pid>/status;
    (0, 0) for a process that is gone."""
    found = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0]) / 1024  # kB
    except OSError:
        pass
    return found.get("VmRSS", 0.0), found.get("VmHWM", 0.0)


def streamed_message(chunks) -> dict:
    """The openai client's streamed chunks put back together as the assistant message (the anchors)."""
    content, calls = [], {}
    for chunk in chunks:
        for choice in chunk.choices:
            content.append(choice.delta.content or "")
            for part in choice.delta.tool_calls or ():
                call = calls.setdefault(part.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["function"]["name"] += part.function.name or ""
                    call["function"]["arguments"] += part.function.arguments or ""
    message = {"role": "assistant", "content": "".join(content)}
    if calls:
        message["tool_calls"] = [call for _, call in sorted(calls.items())]
    return message
