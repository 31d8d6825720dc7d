"""SQLite under modest concurrency: N runs at once, two operators deciding each approval together.

Starts the system as `manage.py up` does (daphne web server, one Celery worker with 50 threads
and the scheduler, the offline demo model) on a fresh SQLite database in a temporary folder,
creates two operators, launches N runs of "Cancel order ORD-1001" through the API at once and,
as each destructive call waits, has both operators decide it at the same moment: one through the
API with a token (approve), one through the dashboard's form with a session and its CSRF token
(reject). Prints the runs' endings, the HTTP statuses and the winners per approval.

    REDIS_URL=redis://127.0.0.1:6379/6 .venv/bin/python bench/sqlite_decisions.py [--runs 20]

Passes when every run succeeded or was cancelled by the rejection (no internal_error), every
decision was answered 200 or 409 (no 500), and each approval had exactly one winner.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import ROOT, free_port  # noqa: E402

TASK = "Cancel order ORD-1001"
FINISHED = {"succeeded", "failed", "cancelled"}


def child_env(data_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "DEMO_MODEL", "SQLITE_"))}
    env.pop("DATABASE_URL", None)
    env.update(AGENTSITE_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="agentsite.settings", PYTHONUNBUFFERED="1",
               REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), LOG_LEVEL="WARNING")
    return env


def prepare(env: dict) -> dict:
    """Migrate the fresh database and create two operators; their tokens and passwords."""
    script = (
        "import json; from django.contrib.auth.models import Group, User; "
        "from accounts.services import api_token_create; out = {}\n"
        "for name in ('olivia', 'oscar'):\n"
        "    u = User.objects.create_user(name, password='pw-' + name + '-123456')\n"
        "    u.groups.add(Group.objects.get(name='operators')); out[name] = api_token_create(user=u)[1]\n"
        "print(json.dumps(out))"
    )
    py = sys.executable
    subprocess.run([py, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    done = subprocess.run([py, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_system(env: dict, port: int, data_dir: Path) -> list[subprocess.Popen]:
    py = sys.executable
    log = open(data_dir / "system.log", "ab")
    web = subprocess.Popen([py, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "agentsite.asgi:application"],
                           cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    worker = subprocess.Popen(
        [py, "-m", "celery", "-A", "agentsite", "worker", "--pool", "threads", "--concurrency", "50",
         "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
         "-B", "--schedule", str(data_dir / "celerybeat-schedule")],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    return [web, worker]


def wait_for_web(base: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            requests.get(base + "/login/", timeout=2)
            return
        except requests.RequestException:
            time.sleep(0.2)
    raise SystemExit("the web server did not answer")


def form_session(base: str, username: str) -> requests.Session:
    """A browser-like session: sign in through the login form (with its CSRF token)."""
    session = requests.Session()
    page = session.get(base + "/login/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    signed = session.post(base + "/login/", timeout=30, allow_redirects=False,
                          data={"csrfmiddlewaretoken": token, "username": username, "password": f"pw-{username}-123456"},
                          headers={"Referer": base + "/login/"})
    assert signed.status_code == 302, f"sign-in failed: HTTP {signed.status_code}"
    return session


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (database, logs)")
    parser.add_argument("--all-at-once", action="store_true",
                        help="wait until every run waits for its approval, then send all decisions together")
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="sqlite-decisions-"))
    env = child_env(data_dir)
    import redis

    redis.Redis.from_url(env["REDIS_URL"]).flushdb()
    tokens = prepare(env)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    procs = start_system(env, port, data_dir)
    try:
        wait_for_web(base)
        api = {name: {"Authorization": f"Token {key}"} for name, key in tokens.items()}
        oscar = form_session(base, "oscar")
        csrf = oscar.cookies["csrftoken"]

        def launch(_):
            r = requests.post(base + "/api/v1/runs/", json={"agent": "demo", "task": TASK}, headers=api["olivia"], timeout=120)
            assert r.status_code == 201, f"launch: HTTP {r.status_code} {r.text[:200]}"
            return r.json()["run_id"]

        threads_out: list = []
        start = threading.Barrier(args.runs)

        def launch_at_once(i):
            start.wait()
            threads_out.append(launch(i))

        launchers = [threading.Thread(target=launch_at_once, args=(i,)) for i in range(args.runs)]
        for t in launchers:
            t.start()
        for t in launchers:
            t.join()
        run_ids = sorted(threads_out)

        statuses: Counter = Counter()
        winners: dict[int, list[str]] = {}
        errors: list[str] = []
        lock = threading.Lock()

        everyone = threading.Barrier(2 * args.runs) if args.all_at_once else None

        def decide_together(approval_id: int) -> None:
            both = everyone or threading.Barrier(2)

            def by_token():
                both.wait()
                r = requests.post(f"{base}/api/v1/approvals/{approval_id}/approve/", json={}, headers=api["olivia"], timeout=120)
                return r.status_code, "olivia", r.text[:300]

            def by_form():
                both.wait()
                r = oscar.post(f"{base}/approvals/{approval_id}/decide/", timeout=120,
                               data={"decision": "reject", "reason": "not this one", "csrfmiddlewaretoken": csrf},
                               headers={"Accept": "application/json", "Referer": base + "/approvals/", "X-CSRFToken": csrf})
                return r.status_code, "oscar", r.text[:300]

            results = []
            pair = [threading.Thread(target=lambda f=f: results.append(f())) for f in (by_token, by_form)]
            for t in pair:
                t.start()
            for t in pair:
                t.join()
            with lock:
                for code, who, text in results:
                    statuses[code] += 1
                    if code == 200:
                        winners.setdefault(approval_id, []).append(who)
                    elif code != 409:
                        errors.append(f"approval {approval_id} by {who}: HTTP {code} {text}")
                winners.setdefault(approval_id, [])

        seen: set[int] = set()
        deciders: list[threading.Thread] = []
        deadline = time.monotonic() + args.timeout
        runs: dict[int, dict] = {}
        while time.monotonic() < deadline:
            pending = requests.get(base + "/api/v1/approvals/", headers=api["olivia"], timeout=60).json()
            if args.all_at_once and len([i for i in pending if i["run_id"] in run_ids]) < len(run_ids) and not seen:
                time.sleep(0.2)
                continue
            for item in pending:
                if item["id"] not in seen and item["run_id"] in run_ids:
                    seen.add(item["id"])
                    t = threading.Thread(target=decide_together, args=(item["id"],))
                    t.start()
                    deciders.append(t)
            runs = {rid: requests.get(f"{base}/api/v1/runs/{rid}/", headers=api["olivia"], timeout=60).json()
                    for rid in run_ids}
            if all(r["status"] in FINISHED for r in runs.values()):
                break
            time.sleep(0.2)
        for t in deciders:
            t.join()

        endings = Counter(f"{r['status']}/{r.get('stop_reason') or '-'}" for r in runs.values())
        internal = [f"run {rid}: {r.get('stop_detail', '')}" for rid, r in runs.items() if r.get("stop_reason") == "internal_error"]
        unfinished = [rid for rid, r in runs.items() if r["status"] not in FINISHED]
        bad_winners = {aid: w for aid, w in winners.items() if len(w) != 1}
        print(f"runs: {len(run_ids)}  endings: {dict(endings)}")
        print(f"approvals decided: {len(winners)}  HTTP statuses: {dict(sorted(statuses.items()))}")
        print(f"approvals without exactly one winner: {bad_winners or 'none'}")
        for line in internal + errors:
            print("  " + line)
        if unfinished:
            print(f"  not finished after {args.timeout:g} s: {unfinished}")
        ok = not internal and not errors and not bad_winners and not unfinished and len(winners) == len(run_ids)
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if args.keep:
            print(f"kept {data_dir}")
        else:
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
