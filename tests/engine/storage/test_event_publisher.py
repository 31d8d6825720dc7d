"""The timeline event publisher, against the real channels-redis layer."""

import asyncio
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from runs.engine.storage.events import PUBLISH_LINGER_SECONDS, PUBLISH_WAKE_BURST, _Publisher, publish_pace

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 10

# A process that publishes one event and ends at once, as `manage.py run_agent` does after the
# run's last commit.
CHILD = """
import django
django.setup()
from runs.engine.storage.events import publish
publish("run-exit-check", {"type": "run.event", "run_id": 1, "seq": 7, "kind": "run", "data": {"status": "succeeded"}})
"""


@pytest.mark.worker  # a process of its own that exits
def test_an_event_published_just_before_the_process_exits_still_goes_out():
    async def steps(receive):
        env = dict(os.environ, DJANGO_SETTINGS_MODULE="agentsite.settings")
        subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, check=True, timeout=60)
        return await receive()

    message = listening("run-exit-check", steps)
    assert message["seq"] == 7 and message["data"] == {"status": "succeeded"}


def test_a_rested_publisher_sends_its_first_wakes_at_once_then_lingers():
    tokens, decisions = float(PUBLISH_WAKE_BURST), []
    for _ in range(PUBLISH_WAKE_BURST + 2):
        at_once, tokens = publish_pace(tokens=tokens, rested=0.0)
        decisions.append(at_once)
    assert decisions == [True] * PUBLISH_WAKE_BURST + [False, False]


def test_rest_gives_back_one_immediate_wake_per_linger_period_up_to_the_burst():
    assert publish_pace(tokens=0.0, rested=PUBLISH_LINGER_SECONDS * 0.5) == (False, 0.5)
    assert publish_pace(tokens=0.5, rested=PUBLISH_LINGER_SECONDS * 0.5) == (True, 0.0)
    assert publish_pace(tokens=0.0, rested=3600.0) == (True, PUBLISH_WAKE_BURST - 1)


class WatchedPublisher(_Publisher):
    """A publisher on the real layer whose clock stands still (so it never counts as rested) and
    whose lingering and batches the test sees; `hold` keeps it lingering until the test says."""

    def __init__(self):
        self.lingers: list[float] = []
        self.batches: list[list[int]] = []
        self.lingering, self.hold = threading.Event(), threading.Event()
        self.hold.set()
        super().__init__(clock=lambda: 0.0, linger=self._linger)

    def _linger(self, seconds: float) -> None:
        self.lingers.append(seconds)
        self.lingering.set()
        assert self.hold.wait(TIMEOUT)

    async def _send(self, layer, batch):
        self.batches.append([message["seq"] for _, message in batch])
        await _Publisher._send(layer, batch)


def listening(group: str, steps):
    """Run `steps(receive)` while a channel of a layer instance of this test's own is in `group`.

    Not the process's shared layer: channels-redis 4.3 keeps per-channel asyncio locks on the
    layer object, and one left bound to an earlier test's event loop breaks a later receive.
    """
    layer = RedisChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"])

    async def go():
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        try:
            return await steps(lambda: asyncio.wait_for(layer.receive(channel), TIMEOUT))
        finally:
            await layer.group_discard(group, channel)
            await layer.close_pools()

    return async_to_sync(go)()


def event(seq: int) -> dict:
    return {"type": "run.event", "run_id": 1, "seq": seq, "kind": "verification", "data": {"ok": True}}


def test_an_event_published_while_the_publisher_is_idle_goes_out_without_lingering():
    publisher, group = WatchedPublisher(), f"run-idle-{uuid.uuid4().hex}"

    async def steps(receive):
        publisher.submit([(group, event(1))])
        return await receive()

    assert listening(group, steps)["seq"] == 1
    assert publisher.lingers == [] and publisher.batches == [[1]]


def test_events_arriving_faster_than_they_are_sent_are_batched_after_one_linger():
    publisher, group = WatchedPublisher(), f"run-busy-{uuid.uuid4().hex}"
    burst = PUBLISH_WAKE_BURST

    async def steps(receive):
        received = []
        for seq in range(1, burst + 1):  # each sent at once: the wakes the publisher had saved
            publisher.submit([(group, event(seq))])
            received.append((await receive())["seq"])
        publisher.hold.clear()
        publisher.submit([(group, event(burst + 1))])  # no wake left: it lingers ...
        assert await asyncio.to_thread(publisher.lingering.wait, TIMEOUT)
        for seq in range(burst + 2, burst + 5):  # ... and what comes meanwhile goes with it
            publisher.submit([(group, event(seq))])
        publisher.hold.set()
        for _ in range(4):
            received.append((await receive())["seq"])
        return received

    assert listening(group, steps) == list(range(1, burst + 5))
    assert publisher.lingers == [PUBLISH_LINGER_SECONDS]
    assert publisher.batches == [[seq] for seq in range(1, burst + 1)] + [list(range(burst + 1, burst + 5))]


def test_the_events_of_one_commit_go_out_together_and_in_order():
    publisher, group = WatchedPublisher(), f"run-commit-{uuid.uuid4().hex}"

    async def steps(receive):
        publisher.submit([(group, event(seq)) for seq in (1, 2, 3)])
        return [(await receive())["seq"] for _ in range(3)]

    assert listening(group, steps) == [1, 2, 3]
    assert publisher.batches == [[1, 2, 3]] and publisher.lingers == []
