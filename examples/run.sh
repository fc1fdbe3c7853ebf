#!/usr/bin/env bash
# Push 1,000 leads, start three workers, watch the session's stats drain.
#
#   examples/run.sh                        # starts `leaseq serve` (embedded PostgreSQL) if needed
#   LEASEQ_URL=http://host:8000 examples/run.sh   # use a running service
#
# Needs `leaseq` on PATH (pip install -e ./clients/python -e . in the repo) and python3.
set -euo pipefail
cd "$(dirname "$0")"

export LEASEQ_URL=${LEASEQ_URL:-http://127.0.0.1:8000}
SESSION=${SESSION:-example-$(date +%s)}
LEADS=${LEADS:-1000}
LOGS=${LOGS:-$(mktemp -d)}
started=()

cleanup() {
    for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# GET a path of the service and print the answer (sends LEASEQ_TOKEN when set).
get() {
    python3 - "$LEASEQ_URL$1" <<'PY'
import os, sys, urllib.request
request = urllib.request.Request(sys.argv[1])
if os.environ.get("LEASEQ_TOKEN"):
    request.add_header("Authorization", f"Bearer {os.environ['LEASEQ_TOKEN']}")
print(urllib.request.urlopen(request, timeout=5).read().decode())
PY
}
answers() { get "$1" >/dev/null 2>&1; }
running() { for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 0; done; return 1; }

if ! answers /healthz; then
    port=${LEASEQ_URL##*:}
    echo "no service at $LEASEQ_URL: starting leaseq serve on port $port"
    leaseq serve --port "$port" --migrate >"$LOGS/serve.log" 2>&1 &
    started+=($!)
    for _ in $(seq 1 120); do answers /readyz && break; sleep 0.5; done
    answers /readyz || { echo "leaseq serve did not start; see $LOGS/serve.log"; exit 1; }
fi

python3 -c 'import json, sys; [print(json.dumps({"n": n})) for n in range(int(sys.argv[1]))]' "$LEADS" \
    | leaseq push --session "$SESSION" --payloads

echo "three workers; their logs in $LOGS"
workers=()
for i in 1 2 3; do
    leaseq worker --session "$SESSION" --concurrency 8 --wait 2 --quiet --owner "example-$i" \
        -- python3 handle.py >"$LOGS/worker-$i.log" 2>&1 &
    workers+=($!)
    started+=($!)
done

# Watch /sessions/{session}/stats until the three workers have stopped (queue empty).
while running "${workers[@]}"; do
    get "/sessions/$SESSION/stats"
    sleep 1
done
wait "${workers[@]}"
leaseq stats --session "$SESSION"
echo "the ledger's audit:"
get "/sessions/$SESSION/report"
