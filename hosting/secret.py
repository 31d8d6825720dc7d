"""Keys generated into the data folder for an installation that sets none."""
import os
import secrets
import tempfile
from pathlib import Path


def local_key(path: Path) -> str:
    """The key kept in `path`, created on first use, readable by its owner only (0600).

    The file is never world-readable, not even for a moment and whatever the umask: the key is
    written to a temporary file that mkstemp creates with mode 0600, then linked into place, which
    fails if another process (a worker starting beside the web server) got there first; then that
    process's key is the one everybody reads.
    """
    if path.exists():
        return path.read_text().strip()
    # A folder others may write to would let them swap the key file for one they know.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as file:
            file.write(key)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return path.read_text().strip()
    finally:
        os.unlink(temporary)
    return key
