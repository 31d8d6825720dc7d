"""Handing work to workers from a process that is not a worker (the web server, the CLI)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.worker  # a web process of its own


def test_a_fresh_web_process_knows_the_tasks_it_queues_by_name():
    # Services queue tasks by name; a process that never imported runs.tasks must still find them.
    code = "from celery import current_app; print(sorted(n for n in current_app.tasks if n.startswith('runs.')))"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'runs.tasks.advance_run'" in done.stdout and "'runs.tasks.send_webhook'" in done.stdout
