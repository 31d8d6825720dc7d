"""The test identity provider as a process: tests/accounts/oidc_provider served by runserver on a
free port, with an RSA key made for this session, its own SQLite database, one confidential
client (this site) and people whose groups a test changes as the provider's administrator would."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import ROOT, free_port

CLIENT_ID = "agentsite-test"
CLIENT_SECRET = "test-client-secret-" + os.urandom(8).hex()
PASSWORD = "provider password 1"
ROLE_MAP = "agentsite-admins=admin,agentsite-operators=operator,everyone=viewer"


def rsa_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


class IdentityProvider:
    def __init__(self, directory: Path):
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.issuer = f"{self.url}/o"
        key_file = directory / "op-key.pem"
        key_file.write_text(rsa_key_pem())
        key_file.chmod(0o600)
        self.quirks_file = directory / "op-quirks.json"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.accounts.oidc_provider.settings",
            "OP_DATABASE": str(directory / "op.sqlite3"),
            "OP_KEY_FILE": str(key_file),
            "OP_ISSUER": self.issuer,
            "OP_QUIRKS_FILE": str(self.quirks_file),
            "PYTHONUNBUFFERED": "1",
        }
        self.env.pop("DATABASE_URL", None)
        self.log_path = directory / "op.log"
        self.proc: subprocess.Popen | None = None

    def seed(self, **given) -> None:
        """Run seed.py with `given` (client=..., users=[...]) in the provider's database."""
        subprocess.run(
            [sys.executable, "-m", "tests.accounts.oidc_provider.seed"],
            input=json.dumps(given).encode(),
            cwd=ROOT,
            env=self.env,
            check=True,
            timeout=120,
        )

    def person(self, username: str, *groups: str) -> None:
        """Creates or changes a person of the provider: exactly these groups from now on."""
        self.seed(
            users=[
                {
                    "username": username,
                    "password": PASSWORD,
                    "email": f"{username}@example.test",
                    "groups": list(groups),
                }
            ]
        )

    def quirks(self, **quirks) -> None:
        """From now on the provider answers with these quirks (tests/accounts/oidc_provider/validator.py);
        none: as usual."""
        self.quirks_file.write_text(json.dumps(quirks))

    def start(self) -> "IdentityProvider":
        args = [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}", "--noreload"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the identity provider exited:\n{self.log()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{self.issuer}/.well-known/openid-configuration", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        pytest.fail(f"the identity provider did not answer within 60 s:\n{self.log()[-4000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
