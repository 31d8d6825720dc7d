"""A PostgreSQL read replica (DATABASE_REPLICA_URL, hosting/replica.py), against a real
streaming replica this module starts: a primary and a replica made with pg_basebackup, each a
cluster of its own on a free port. Each check runs in a process configured as a deployment with
a replica is (tests/support/replica_checks.py): pages (the history, its API and exports, the
metrics page, /metrics) read the replica; the run page, decisions and writes read the primary;
a replica further behind than allowed, or down, or failing under a page, is left for the primary.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.pg_pair import PgPair, server_bin

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.worker, pytest.mark.postgres_only]


@pytest.fixture(scope="module")
def pair():
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL replica: the PostgreSQL pass runs it")
    if server_bin() is None:
        pytest.skip("PostgreSQL's server programs (initdb, pg_basebackup) are not installed")
    made = PgPair.create()
    yield made
    made.destroy()


@pytest.mark.parametrize("check", [
    "pages_read_the_replica_and_decisions_the_primary",
    "a_replica_further_behind_than_allowed_is_not_read",
    "a_replica_that_is_down_is_not_read_and_one_that_fails_under_a_page_is_left",
])
def test_the_read_replica(pair, check):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_", "SQLITE_"))}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.replica_checks", check],
        cwd=ROOT, env={**env, "PGPAIR": pair.to_json()}, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    assert f"passed: {check}" in done.stdout


def test_without_a_replica_every_read_goes_to_the_primary():
    from hosting import replica
    from runs.models import Run

    if replica.configured():
        pytest.skip("this suite runs with DATABASE_REPLICA_URL set")
    router = replica.ReplicaRouter()
    with replica.replica_reads():
        assert router.db_for_read(Run) is None
    assert router.db_for_read(Run) is None and router.db_for_write(Run) is None
