#!/usr/bin/env bash
# Instructions per POST /jobs, counted by callgrind (repeatable on a busy machine, unlike CPU
# time): `ingest serve` with no worker on a fresh SQLite file, under valgrind with counting
# off; 100 POSTs to warm it up, then counting on for N POSTs, then off.
#   bench/post_instructions.sh [N=200] [PORT=8199] [OUT]
# Run from a checkout with `make install` done; prints "<instructions>/POST". With OUT, the
# callgrind file is kept there: `callgrind_annotate --inclusive=yes OUT` shows where the
# instructions went (C functions only: the interpreter's, SQLite's, pydantic-core's).
set -euo pipefail
n="${1:-200}"; port="${2:-8199}"; out="${3:-}"
work="$(mktemp -d)"
trap '[ -z "$out" ] || cp "$work/cg.out" "$out"; rm -rf "$work"' EXIT
INGEST_DATABASE_URL="sqlite:///$work/db.sqlite" INGEST_WORKER_ENABLED=false INGEST_ACCESS_LOG=false \
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.out" \
  .venv/bin/python .venv/bin/ingest serve --port "$port" >"$work/serve.log" 2>&1 &
pid=$!
.venv/bin/python - "$n" "$port" "$pid" <<'PY'
import subprocess
import sys
import time

import httpx

n, port, pid = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
    for _ in range(3000):  # valgrind starts the server slowly
        try:
            client.get("/healthz")
            break
        except httpx.TransportError:
            time.sleep(0.1)
    for i in range(100):
        client.post("/jobs", json={"url": f"http://example.com/warm/{i}"})
    subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
    for i in range(n):
        answer = client.post("/jobs", json={"url": f"http://example.com/{i}"})
        assert answer.status_code == 201, answer.text
    subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
PY
kill -INT "$pid"
wait "$pid" || true
callgrind_annotate "$work/cg.out" 2>/dev/null | grep -m1 "PROGRAM TOTALS" \
  | awk -v n="$n" '{gsub(",", "", $1); printf "%.0f instructions/POST\n", $1 / n}'
