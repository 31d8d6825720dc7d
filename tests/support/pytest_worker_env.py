"""pytest plugin (pytest.ini: `-p tests.support.pytest_worker_env`): a Redis database per test process.

Under pytest-xdist (`-n N`) every worker process gw0, gw1, ... gets the Redis database of
REDIS_URL plus its worker number: with REDIS_URL=redis://127.0.0.1:6379/2 and -n 4 the workers use
databases 2, 3, 4 and 5. The Celery broker, the cache and the channel layer of a test process all
use REDIS_URL, and two processes sharing one would see each other's queued tasks and websocket
groups (run ids repeat across test databases). ./test gives the SQLite pass databases from 2 and
the PostgreSQL pass databases from 8, so the two passes never share one either (0 stays the
app's own default).

Django reads its settings before any conftest.py is imported (pytest-django loads them in
pytest_load_initial_conftests), so this runs as a plugin loaded with -p, at import: it rewrites
REDIS_URL in os.environ, which the settings and every process the tests start then read.
Without xdist it changes nothing. Test databases need nothing here: their names carry the
process id (agentsite/settings.py) and pytest-django adds the worker id.
"""
import os
from urllib.parse import urlsplit, urlunsplit

import pytest

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"  # agentsite/settings.py's default
REDIS_DATABASES = 16  # redis-server's default `databases`


def worker_redis_url(url: str, worker: str) -> str:
    """`url` with its database number moved up by the number of xdist worker `worker` (gw3 -> 3)."""
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    db = base + int(worker.removeprefix("gw"))
    if db >= REDIS_DATABASES:
        raise pytest.UsageError(
            f"xdist worker {worker} would use Redis database {db} of {url} (redis has {REDIS_DATABASES}): "
            "fewer workers (-n), or a REDIS_URL with a lower database number"
        )
    return urlunsplit(parts._replace(path=f"/{db}"))


_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    os.environ["REDIS_URL"] = worker_redis_url(os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL, _worker)
