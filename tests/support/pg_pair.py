"""A PostgreSQL primary and its streaming replica, two clusters of the test's own on free ports:
the primary made with initdb (replication allowed from 127.0.0.1), the replica with pg_basebackup
from it. For the read replica's tests (tests/site/test_read_replica.py); needs PostgreSQL's server
programs (Debian's postgresql package: /usr/lib/postgresql/<version>/bin). As root, the clusters
run as the `postgres` user (PostgreSQL refuses to run as root)."""

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def server_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgPair:
    DATABASE = "agentsite"

    def __init__(self, directory: str, bin_dir: str, primary_port: int, replica_port: int, user: str | None):
        self.directory, self.bin = Path(directory), Path(bin_dir)
        self.primary_port, self.replica_port, self.user = primary_port, replica_port, user

    # --- made once by the test, handed to its subprocess as JSON ---------------------------------

    @classmethod
    def create(cls) -> "PgPair":
        bin_dir = server_bin()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL's server programs are not installed")
        user = "postgres" if os.geteuid() == 0 else None
        directory = tempfile.mkdtemp(prefix="agentsite-pgpair-")
        if user:
            shutil.chown(directory, user)
        pair = cls(directory, str(bin_dir), free_port(), free_port(), user)
        pair._as_owner("initdb", "-D", str(pair.primary_dir), "-A", "trust", "-U", "postgres", "--no-sync")
        with open(pair.primary_dir / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {pair.primary_port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{pair.directory}'\nwal_level = replica\nmax_wal_senders = 4\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            )
        with open(pair.primary_dir / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        pair._as_owner("pg_ctl", "-D", str(pair.primary_dir), "-l", str(pair.directory / "primary.log"), "-w", "start")
        pair._as_owner("pg_basebackup", "-h", "127.0.0.1", "-p", str(pair.primary_port), "-U", "postgres",
                       "-D", str(pair.replica_dir), "-R", "-X", "stream")
        with open(pair.replica_dir / "postgresql.conf", "a") as conf:
            conf.write(f"port = {pair.replica_port}\nhot_standby = on\n")
        pair.start_replica()
        pair.sql("primary", f"CREATE DATABASE {cls.DATABASE}", database="postgres")
        pair.wait_for(lambda: pair.sql("replica", "SELECT 1", database=cls.DATABASE) == [(1,)])
        return pair

    def to_json(self) -> str:
        return json.dumps({"directory": str(self.directory), "bin_dir": str(self.bin),
                           "primary_port": self.primary_port, "replica_port": self.replica_port, "user": self.user})

    @classmethod
    def from_json(cls, text: str) -> "PgPair":
        return cls(**json.loads(text))

    def destroy(self) -> None:
        for data in (self.replica_dir, self.primary_dir):
            if (data / "postmaster.pid").exists():
                self._as_owner("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- what the tests do to it ------------------------------------------------------------------

    @property
    def primary_dir(self) -> Path:
        return self.directory / "primary"

    @property
    def replica_dir(self) -> Path:
        return self.directory / "replica"

    def url(self, which: str) -> str:
        port = self.primary_port if which == "primary" else self.replica_port
        return f"postgres://postgres@127.0.0.1:{port}/{self.DATABASE}"

    def sql(self, which: str, statement: str, params=(), *, database: str | None = None) -> list[tuple]:
        import psycopg

        port = self.primary_port if which == "primary" else self.replica_port
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname=database or self.DATABASE,
                             autocommit=True, connect_timeout=3) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def pause_replay(self) -> None:
        self.sql("replica", "SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        self.sql("replica", "SELECT pg_wal_replay_resume()")

    def caught_up(self) -> None:
        """Wait until a query on the replica sees everything the primary committed so far: a
        transaction committed now on the primary is visible in a new snapshot on the replica.
        (Replay past the primary's WAL position alone was seen to come a moment before a new
        snapshot on the replica showed the rows: the history then missed them now and then.)"""
        (lsn,) = self.sql("primary", "SELECT pg_current_wal_lsn()::text")[0]
        (xid,) = self.sql("primary", "SELECT txid_current()")[0]  # committed after every earlier commit
        self.wait_for(lambda: self.sql("replica", "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,))[0][0])
        self.wait_for(lambda: self.sql(
            "replica", "SELECT txid_visible_in_snapshot(%s, txid_current_snapshot())", (xid,))[0][0])

    def stop_replica(self) -> None:
        self._as_owner("pg_ctl", "-D", str(self.replica_dir), "-m", "fast", "-w", "stop")

    def start_replica(self) -> None:
        self._as_owner("pg_ctl", "-D", str(self.replica_dir), "-l", str(self.directory / "replica.log"), "-w", "start")

    @staticmethod
    def wait_for(condition, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError("the PostgreSQL pair did not get there in time")
            time.sleep(0.1)

    def _as_owner(self, program: str, *args: str, check: bool = True) -> None:
        command = [str(self.bin / program), *args]
        if self.user and os.geteuid() == 0:
            command = ["runuser", "-u", self.user, "--", *command]
        env = {**os.environ, "HOME": pwd.getpwnam(self.user).pw_dir if self.user else os.environ.get("HOME", "/")}
        done = subprocess.run(command, capture_output=True, text=True, cwd="/", env=env, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
