"""The timeline event publisher, against the real channels-redis layer."""
import asyncio
import os
import subprocess
import sys
from pathlib import Path

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

ROOT = Path(__file__).resolve().parents[2]

# A process that publishes one event and ends at once, as `manage.py run_agent` does after the
# run's last commit.
CHILD = """
import django
django.setup()
from runs.services.events import publish
publish("run-exit-check", {"type": "run.event", "run_id": 1, "seq": 7, "kind": "run", "data": {"status": "succeeded"}})
"""


def test_an_event_published_just_before_the_process_exits_still_goes_out():
    layer = get_channel_layer()

    async def go():
        channel = await layer.new_channel()
        await layer.group_add("run-exit-check", channel)
        try:
            env = dict(os.environ, DJANGO_SETTINGS_MODULE="agentsite.settings")
            subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, check=True, timeout=60)
            return await asyncio.wait_for(layer.receive(channel), timeout=10)
        finally:
            await layer.group_discard("run-exit-check", channel)

    message = async_to_sync(go)()
    assert message["seq"] == 7 and message["data"] == {"status": "succeeded"}
