"""A fresh installation starts without the "No directory at …/staticfiles" warning WhiteNoise
printed on every start: the pages' files are served from static/ without collectstatic."""
import subprocess
import sys

import pytest

from tests.site.test_security_settings import ROOT, child_env

# The web server's request handler, built as daphne and `manage.py up` build it: WhiteNoise
# looks for STATIC_ROOT when its middleware is made. Any warning fails the process.
LOAD_MIDDLEWARE = """
import django
django.setup()
from django.core.handlers.asgi import ASGIHandler
from django.test import Client
ASGIHandler()
response = Client().get("/static/css/app.css")
print(response.status_code)
"""


@pytest.mark.worker  # Django in a process of its own
def test_a_fresh_data_folder_starts_without_a_static_files_warning_and_serves_the_stylesheet(tmp_path):
    data_dir = tmp_path / "var"
    child = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", LOAD_MIDDLEWARE], cwd=ROOT,
                           env=child_env(data_dir), capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert "No directory at" not in child.stderr
    assert child.stdout.strip().splitlines()[-1] == "200"
    assert (data_dir / "staticfiles").is_dir()
