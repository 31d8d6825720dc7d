import secrets
from pathlib import Path


def local_secret_key(data_dir: Path) -> str:
    """A per-installation key kept in the data folder, created on first use."""
    path = data_dir / "secret_key"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key)
    path.chmod(0o600)
    return key
