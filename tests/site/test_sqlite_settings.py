"""Any SQLite database gets the settings that keep two writers from failing with "database is
locked": IMMEDIATE transactions, a 30 s busy timeout and WAL, whether it is the default file or
one named by DATABASE_URL. Settings are read once per process, so each case is a fresh Python."""
import json
import subprocess
import sys

import pytest

from tests.site.test_security_settings import ROOT, child_env

# What a connection of the new process really has, not only what its settings say.
PRINT_SQLITE = """
import json
import django
django.setup()
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("PRAGMA journal_mode")
    journal = cursor.fetchone()[0]
    cursor.execute("PRAGMA busy_timeout")
    busy = cursor.fetchone()[0]
print(json.dumps({"options": connection.settings_dict["OPTIONS"], "name": connection.settings_dict["NAME"],
                  "journal_mode": journal, "busy_timeout_ms": busy}))
"""


def sqlite_of_a_new_process(data_dir, **env) -> dict:
    child_environment = child_env(data_dir, **env)
    if "DATABASE_URL" not in env:
        child_environment.pop("DATABASE_URL", None)
    child = subprocess.run([sys.executable, "-c", PRINT_SQLITE], cwd=ROOT, env=child_environment,
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


@pytest.mark.worker  # Django in a process of its own
@pytest.mark.parametrize("url", ["sqlite:///{path}", "sqlite:///{path}?timeout=5"])
def test_a_sqlite_database_named_by_url_gets_the_defaults_settings(tmp_path, url):
    path = tmp_path / "x" / "db.sqlite3"
    path.parent.mkdir()
    default = sqlite_of_a_new_process(tmp_path / "var-default")
    named = sqlite_of_a_new_process(tmp_path / "var-url", DATABASE_URL=url.format(path=path))
    assert named["name"] == str(path)
    assert default["options"]["transaction_mode"] == named["options"]["transaction_mode"] == "IMMEDIATE"
    assert default["journal_mode"] == named["journal_mode"] == "wal"
    assert default["busy_timeout_ms"] == 30000
    # A timeout the URL sets is the operator's choice and is kept; otherwise the default's 30 s.
    assert named["busy_timeout_ms"] == (5000 if "timeout=5" in url else 30000)
