#!/usr/bin/env bash
# Benchmark of the Temporal engine (make bench): rollouts/s in process and on
# Temporal with 1 and 2 workers (the embedded model at 200 ms per call), the
# wall time added per activity, and a 10,000-task stage's largest history;
# see bench/temporal/main.go. The dev server (scripts/install-test-tools.sh)
# runs in memory on 127.0.0.1; its log is checked for history-size warnings.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
temporal="$root/.cache/bin/temporal"
[[ -x "$temporal" ]] || { echo "bench/temporal.sh: run scripts/install-test-tools.sh first" >&2; exit 1; }
go build -o bin/optimize ./cmd/optimize
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tport=$(port); uport=$(port); sport=$(port)
log=$(mktemp)
"$temporal" server start-dev --ip 127.0.0.1 --headless --port "$tport" --ui-port "$uport" --log-level warn >"$log" 2>&1 &
server=$!
bin/optimize sim --listen "127.0.0.1:$sport" --latency 200ms 2>/dev/null &
sim=$!
trap 'kill $server $sim 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$tport") 2>/dev/null && break; sleep 0.2; done
go run ./bench/temporal --optimize bin/optimize --temporal "127.0.0.1:$tport" --sim "http://127.0.0.1:$sport/v1" "$@"
warnings=$(grep -ci "history size exceeds\|history count exceeds" "$log" || true)
echo "dev server history-size warnings: $warnings"
[[ "$warnings" == 0 ]]
