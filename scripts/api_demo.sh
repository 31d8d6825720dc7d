#!/usr/bin/env bash
# A run launched and approved entirely through the REST API, with curl.
#
# Start the system first (./start), then either give a token:
#   .venv/bin/python manage.py create_api_token admin       # prints the key (shown once; it expires)
#   API_TOKEN=<key> scripts/api_demo.sh
# or let the script make a one-day token with a username and password (POST /api/v1/token/):
#   API_USER=admin API_PASSWORD=<password> scripts/api_demo.sh
#
# It launches the demo agent on "Cancel order ORD-1001" with the offline demo model: the model looks
# the order up, then calls cancel_order, a destructive tool, so the run waits for an operator. The
# script finds that approval in the pending list, approves it, and waits for the run to finish.
# API_URL (default http://127.0.0.1:8000) points it at another server; TASK changes the task.
set -euo pipefail
cd "$(dirname "$0")/.."

API_URL="${API_URL:-http://127.0.0.1:8000}"
TASK="${TASK:-Cancel order ORD-1001}"
PYTHON=python3
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python

# field JSON PATH: print one value of a JSON document read on stdin (curl output), e.g. "run_id".
field() { "$PYTHON" -c 'import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1].split("."):
    value = value[int(key)] if isinstance(value, list) else value[key]
print("" if value is None else value)' "$1"; }

if [ -z "${API_TOKEN:-}" ]; then
  if [ -z "${API_USER:-}" ] || [ -z "${API_PASSWORD:-}" ]; then
    echo "Set API_TOKEN, or API_USER and API_PASSWORD (see the top of $0)." >&2
    exit 2
  fi
  credentials=$("$PYTHON" -c 'import json, sys; print(json.dumps({"username": sys.argv[1], "password": sys.argv[2], "name": "api_demo.sh", "days": 1}))' \
    "$API_USER" "$API_PASSWORD")
  API_TOKEN=$(curl -fsS -X POST "$API_URL/api/v1/token/" -H 'Content-Type: application/json' -d "$credentials" | field token)
fi

# api METHOD PATH [JSON BODY]: one authenticated call; prints the body, fails on an HTTP error.
api() {
  local out status
  out=$(mktemp)
  status=$(curl -sS -o "$out" -w '%{http_code}' -X "$1" "$API_URL$2" \
    -H "Authorization: Token $API_TOKEN" -H 'Content-Type: application/json' -H 'Accept: application/json' \
    ${3:+-d "$3"})
  if [ "$status" -ge 400 ]; then
    echo "$1 $2 answered $status: $(cat "$out")" >&2
    rm -f "$out"
    return 1
  fi
  cat "$out"
  rm -f "$out"
}

# wait_for RUN_ID STATUS...: poll the run until its status is one of STATUS (60 s at most).
wait_for() {
  local run_id=$1 status
  shift
  for _ in $(seq 120); do
    status=$(api GET "/api/v1/runs/$run_id/" | field status)
    for wanted in "$@"; do
      if [ "$status" = "$wanted" ]; then echo "$status"; return 0; fi
    done
    sleep 0.5
  done
  echo "run $run_id is still $status after 60 s (is a worker running? ./start starts one)" >&2
  return 1
}

task_json=$("$PYTHON" -c 'import json, sys; print(json.dumps({"agent": "demo", "task": sys.argv[1]}))' "$TASK")
run_id=$(api POST /api/v1/runs/ "$task_json" | field run_id)
echo "launched run $run_id: $TASK"

status=$(wait_for "$run_id" awaiting_approval succeeded failed cancelled)
echo "run $run_id is $status"

if [ "$status" = awaiting_approval ]; then
  pending=$(api GET /api/v1/approvals/)
  approval_id=$(echo "$pending" | "$PYTHON" -c 'import json, sys
items = [a for a in json.load(sys.stdin)["results"] if a["run_id"] == int(sys.argv[1])]
print(items[0]["id"])' "$run_id")
  echo "approving $(echo "$pending" | "$PYTHON" -c 'import json, sys
a = [a for a in json.load(sys.stdin)["results"] if a["id"] == int(sys.argv[1])][0]
print(a["tool"], "with arguments", json.dumps(a["arguments"], ensure_ascii=False))' "$approval_id") (approval $approval_id)"
  api POST "/api/v1/approvals/$approval_id/approve/" '{"reason": "approved from scripts/api_demo.sh"}' | field detail
  status=$(wait_for "$run_id" succeeded failed cancelled)
fi

detail=$(api GET "/api/v1/runs/$run_id/")
echo "run $run_id $status ($(echo "$detail" | field stop_reason)): $(echo "$detail" | field answer)"
[ "$status" = succeeded ]
