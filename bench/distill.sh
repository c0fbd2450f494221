#!/usr/bin/env bash
# Benchmark of the distillation export (make bench): exports ROWS rows of
# about BYTES bytes each with distill.Writer (JSONL, messages JSONL and zstd
# Parquet per split) and prints rows/s and peak RSS; then times DuckDB
# converting the same rows from JSONL to zstd Parquet, the reference speed.
# The goal: at least DuckDB's rows/s with a peak RSS of at most 512 MB.
#
# The two run alternately REPEAT times, with the page cache written back
# before each run (the export writes 1.4 GB; a run should not pay for the
# previous one's writeback), and the best run of each is compared.
#
#   bench/distill.sh                 # 100,000 rows of ~6 KB, 3 runs each
#   ROWS=20000 REPEAT=1 bench/distill.sh
#   KEEP=1 bench/distill.sh          # keep the work directory
set -euo pipefail

ROWS=${ROWS:-100000}
BYTES=${BYTES:-6000}
REPEAT=${REPEAT:-3}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

work="$(mktemp -d "${TMPDIR:-/tmp}/distill-bench.XXXXXX")"
if [[ -z "${KEEP:-}" ]]; then
	trap 'rm -rf "$work"' EXIT
else
	echo "work directory: $work"
fi

go build -o "$work/distill-bench" ./bench/distill

echo "generating $ROWS rows of ~$BYTES bytes..."
"$work/distill-bench" gen -rows "$ROWS" -bytes "$BYTES" -out "$work/rows.jsonl"
echo "input: $(( $(stat -c %s "$work/rows.jsonl") / 1048576 )) MB of JSONL"

duckdb=yes
if [[ ! -d "$root/.cache/node/node_modules/@duckdb/node-api" ]] || ! command -v node >/dev/null 2>&1; then
	duckdb=
	echo "DuckDB not installed (run scripts/install-test-tools.sh): no reference figure"
fi

# run NAME CMD... runs a command after writing back the page cache, and
# records its rows/s (from the command's own "N rows/s" line) and peak RSS
# (GNU time when installed, else the program's getrusage figure).
run() {
	local name=$1
	shift
	sync
	local out rate rss=""
	if [[ -x /usr/bin/time ]]; then
		out=$(/usr/bin/time -f "peak_rss_kb %M" "$@" 2>&1)
		rss=$(( $(awk '/^peak_rss_kb/ {print $2}' <<<"$out") / 1024 ))
	else
		out=$("$@" 2>&1)
	fi
	out=$(grep -v '^peak_rss_kb' <<<"$out")
	rate=$(grep -o '[0-9]* rows/s' <<<"$out" | cut -d' ' -f1)
	if [[ -z "$rss" ]]; then
		rss=$(grep -o 'peak RSS [0-9]* MB' <<<"$out" | cut -d' ' -f3)
	fi
	echo "  $out"
	echo "$rate $rss" >>"$work/$name.runs"
}

for i in $(seq "$REPEAT"); do
	echo "== run $i/$REPEAT"
	rm -rf "$work/ours" "$work/duckdb.parquet"
	run ours "$work/distill-bench" export -in "$work/rows.jsonl" -out "$work/ours"
	if [[ -n "$duckdb" ]]; then
		run duckdb node bench/distill/duckdb-convert.mjs "$work/rows.jsonl" "$work/duckdb.parquet"
	fi
done

# best NAME prints the best rows/s of NAME's runs and the largest peak RSS.
best() {
	awk 'NR == 1 || $1 > r {r = $1} NR == 1 || $2 > m {m = $2} END {print r, m}' "$work/$1.runs"
}
read -r ours_rate ours_rss < <(best ours)
echo
echo "ours:   $ours_rate rows/s (best of $REPEAT), peak RSS $ours_rss MB (largest);" \
	"Parquet $(( $(du -cb "$work/ours/data/"*.parquet | tail -1 | cut -f1) / 1048576 )) MB," \
	"all files $(( $(du -sb "$work/ours" | cut -f1) / 1048576 )) MB"
if [[ -n "$duckdb" ]]; then
	read -r duck_rate duck_rss < <(best duckdb)
	echo "duckdb: $duck_rate rows/s (best of $REPEAT), peak RSS $duck_rss MB (largest);" \
		"Parquet $(( $(stat -c %s "$work/duckdb.parquet") / 1048576 )) MB"
	verdict="at least DuckDB's speed"
	((ours_rate >= duck_rate)) || verdict="SLOWER than DuckDB"
	echo "ours/duckdb: $(awk -v a="$ours_rate" -v b="$duck_rate" 'BEGIN {printf "%.2f", a / b}')x: $verdict"
fi
((ours_rss <= 512)) || echo "peak RSS $ours_rss MB is over the 512 MB budget"
