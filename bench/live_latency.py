"""Delay from a step's commit in the loop to its arrival at a websocket client, through a real
daphne server and the channels-redis layer. Prints p50 and p99 twice: quiet (the watched run is
the only one in this process) and loaded (other runs advance in threads of this process, as in a
busy worker, so the publisher gets events faster than it sends them).

Run: .venv/bin/python bench/live_latency.py [--runs 10] [--iterations 30] [--load 8]
Uses a temporary SQLite database (or DATABASE_URL) and REDIS_URL (db 11 by default).
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import ROOT, free_port, setup_django, start_demo_model  # noqa: E402

TOOL = {"repeat": True, "latency": 0.02, "tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}}]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--load", type=int, default=8, help="runs advancing beside the watched one when loaded")
    args = parser.parse_args()
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/11")
    demo, url = start_demo_model()
    os.environ["DEMO_MODEL_URL"] = url
    tmp = tempfile.mkdtemp(prefix="bench-live-")
    setup_django(os.path.join(tmp, "bench.sqlite3"))
    import websockets
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create
    from runs.models import Agent

    call_command("migrate", verbosity=0)
    user = User.objects.create_user("bench", password="x")
    user.groups.add(Group.objects.get(name="viewers"))
    client = Client()
    client.force_login(user)
    session = client.cookies["sessionid"].value
    port = free_port()
    env = dict(os.environ, DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost", LOG_LEVEL="WARNING")
    if connection.vendor == "sqlite":
        env["SQLITE_PATH"] = settings.DATABASES["default"]["NAME"]
    web = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "agentsite.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    from hosting.processes import wait_for_port

    wait_for_port("127.0.0.1", port)
    delays: list[float] = []

    def new_script() -> str:
        req = urllib.request.Request(
            url + "/scripts",
            data=json.dumps({"responses": [TOOL], "record": False}).encode(),
            headers={"Content-Type": "application/json"},
        )
        return json.loads(urllib.request.urlopen(req).read())["model"]

    def new_run(iterations: int):
        overrides = {
            "models": [new_script()],
            "tools": ["get_weather"],
            "max_iterations": iterations,
            "repeat_limit": 10**6,
            "summarize_on_stop": False,
        }
        return run_create(agent=Agent.objects.get(name="demo"), task="weather", overrides=overrides)

    async def watch(run_id: int, ready: threading.Event, done: threading.Event):
        headers = {"Cookie": f"sessionid={session}", "Origin": f"http://127.0.0.1:{port}"}
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/runs/{run_id}/", additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "resume", "after": 10**9}))  # live events only
            await ws.recv()  # "resumed"
            ready.set()
            while True:
                try:
                    raw = await asyncio.wait_for(ws.recv(), timeout=1.0)
                except TimeoutError:
                    if done.is_set():
                        return
                    continue
                arrived = time.time()
                message = json.loads(raw)
                if message.get("kind") == "step":
                    delays.append((arrived - commits[(run_id, message["data"]["index"])]) * 1000)

    def background(stop: threading.Event):
        # An unwatched run after another, as the other threads of a busy worker advance theirs.
        try:
            while not stop.is_set():
                run_advance(run_id=new_run(10).pk)
        finally:
            connection.close()

    commits: dict[tuple[int, int], float] = {}
    import runs.engine.storage.events as events

    original_publish = events.publish_many

    def timed_publish(group, messages):
        # Called from transaction.on_commit: the step's transaction has just committed.
        for message in messages:
            if message.get("kind") == "step":
                commits[(message["run_id"], message["data"]["index"])] = time.time()
        original_publish(group, messages)

    def measure(load: int) -> list[float]:
        stop = threading.Event()
        others = [threading.Thread(target=background, args=(stop,)) for _ in range(load)]
        for thread in others:
            thread.start()
        try:
            for number in range(args.runs + 1):  # the first run warms up connections and is not counted
                if number == 1:
                    delays.clear()
                run = new_run(args.iterations)
                ready, done = threading.Event(), threading.Event()
                watcher = threading.Thread(target=lambda: asyncio.run(watch(run.pk, ready, done)))
                watcher.start()
                ready.wait(10)
                run_advance(run_id=run.pk)
                time.sleep(0.5)
                done.set()
                watcher.join()
        finally:
            stop.set()
            for thread in others:
                thread.join()
        return sorted(delays)

    events.publish_many = timed_publish
    figures = []
    try:
        for label, load in (("quiet", 0), ("loaded", args.load)):
            measured = measure(load)
            if not measured:
                raise SystemExit("no step event reached the client")
            figures.append((label, load, measured))
    finally:
        web.terminate()
        demo.terminate()
    print(f"database: {connection.vendor}; {args.runs} watched runs per phase through daphne + channels-redis")
    for label, load, measured in figures:
        p50 = statistics.median(measured)
        p99 = measured[min(len(measured) - 1, int(len(measured) * 0.99))]
        print(
            f"{label:6} ({load} other runs advancing, {len(measured)} step events): commit -> websocket client "
            f"delay p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {measured[-1]:.1f} ms"
        )


if __name__ == "__main__":
    main()
