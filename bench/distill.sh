#!/usr/bin/env bash
# Benchmark of the distillation export (make bench), in two parts.
#
# 1. `optimize distill` on a generated run of ROWS rows of ~BYTES bytes
#    (successful trajectories, ten compression events each): rows/s (rows
#    written over the command's wall time: reading, tokenizing, redacting,
#    de-duplicating, and writing the JSONL, messages and Parquet files) and
#    peak RSS (GNU time), the median of RUNS runs (one by default: a run at
#    100,000 rows takes about 90 s of CPU on two cores). Budget: peak RSS <= 512 MB at 100,000 rows.
# 2. For information, Parquet alone from the same rows (the export's
#    train.jsonl), ours (distill.Writer, parquet-go's writer, decoding the
#    lines with encoding/json) and DuckDB's COPY, at the same zstd level (1;
#    ours is klauspost's pure-Go SpeedFastest, about level 1), the same
#    row-group size (DuckDB takes ROWS_RG as a target; a first DuckDB run
#    measures the mean size it writes and ours is given that) and THREADS
#    cores (GOMAXPROCS for ours, DuckDB's threads, both pinned with taskset).
#    They run in PAIRS pairs, alternating which goes first; the ratio ours/DuckDB
#    is the median of the pairs' ratios. There is no speed goal: the figure
#    says what parquet-go's writer costs next to DuckDB's.
#
# The page cache is written back before each run.
#
#   bench/distill.sh                      # 100,000 rows of ~6 KB
#   ROWS=20000 RUNS=3 PAIRS=5 bench/distill.sh
#   KEEP=1 bench/distill.sh               # keep the work directory
set -euo pipefail

ROWS=${ROWS:-100000}
BYTES=${BYTES:-6000}
RUNS=${RUNS:-1}
PAIRS=${PAIRS:-3}
THREADS=${THREADS:-2}
ROWS_RG=${ROWS_RG:-1000}
LEVEL=1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ ! -x /usr/bin/time ]]; then
	echo "distill bench: /usr/bin/time (GNU time) is required for peak RSS" >&2
	exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/distill-bench.XXXXXX")"
if [[ -z "${KEEP:-}" ]]; then
	trap 'rm -rf "$work"' EXIT
else
	echo "work directory: $work"
fi

go build -o "$work/optimize" ./cmd/optimize
go build -o "$work/distill-bench" ./bench/distill
echo "generating a run of $ROWS rows of ~$BYTES bytes..."
"$work/distill-bench" gen -rows "$ROWS" -bytes "$BYTES" -out "$work/run"

# run NAME CMD... runs a command after writing back the page cache and
# records its rows/s, peak RSS in MB and CPU seconds. The rate is the
# command's "N rows/s" when it prints one, else the rows of its "N rows
# written" over its wall time.
run() {
	local name=$1
	shift
	sync
	local out rate rss cpu start end rows
	start=$(date +%s.%N)
	out=$(/usr/bin/time -f "peak_rss_kb %M cpu_s %U %S" "$@" 2>&1)
	end=$(date +%s.%N)
	rss=$(($(awk '/^peak_rss_kb/ {print $2}' <<<"$out") / 1024))
	cpu=$(awk '/^peak_rss_kb/ {printf "%.2f", $4 + $5}' <<<"$out")
	out=$(grep -v '^peak_rss_kb' <<<"$out")
	rate=$(grep -o '[0-9]* rows/s' <<<"$out" | head -1 | cut -d' ' -f1 || true)
	if [[ -z "$rate" ]]; then
		rows=$(grep -o '[0-9]* rows written' <<<"$out" | head -1 | cut -d' ' -f1)
		rate=$(awk -v n="$rows" -v s="$start" -v e="$end" 'BEGIN {printf "%.0f", n / (e - s)}')
		out="$out ($rate rows/s over $(awk -v s="$start" -v e="$end" 'BEGIN {printf "%.2f", e - s}') s)"
	fi
	echo "  $out (peak RSS $rss MB, CPU $cpu s)"
	echo "$rate $rss $cpu" >>"$work/$name.runs"
}

# median NAME COLUMN prints the median of a column of NAME's runs.
median() { cut -d' ' -f"$2" "$work/$1.runs" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

for i in $(seq "$RUNS"); do
	echo "== optimize distill $i/$RUNS"
	rm -rf "$work/ds"
	run full "$work/optimize" distill --run "$work/run" --out "$work/ds"
done

duckdb=yes
if [[ ! -d "$root/.cache/node/node_modules/@duckdb/node-api" ]] || ! command -v node >/dev/null 2>&1; then
	duckdb=
	echo "DuckDB not installed (run scripts/install-test-tools.sh): no reference figure"
fi
pin=()
if command -v taskset >/dev/null 2>&1 && ((THREADS <= $(nproc))); then
	pin=(taskset -c "0-$((THREADS - 1))")
fi
rows="$work/ds/train.jsonl"
rg=$ROWS_RG
convert=("${pin[@]}" node bench/distill/duckdb-convert.mjs "$rows" "$work/duckdb.parquet" "$LEVEL" "$ROWS_RG" "$THREADS")
if [[ -n "$duckdb" ]]; then
	rg=$(grep -o 'mean [0-9]* rows' <<<"$("${convert[@]}")" | cut -d' ' -f2)
	echo "DuckDB writes row groups of $rg rows on average for a target of $ROWS_RG: ours writes $rg"
fi
ours=("${pin[@]}" env GOMAXPROCS="$THREADS" "$work/distill-bench" export -in "$rows" -out "$work/ours"
	-formats parquet -row-group-rows "$rg")
for i in $(seq "$PAIRS"); do
	echo "== Parquet only, pair $i/$PAIRS"
	rm -rf "$work/ours" "$work/duckdb.parquet"
	if ((i % 2 == 0)) && [[ -n "$duckdb" ]]; then
		run duckdb "${convert[@]}"
		run ours "${ours[@]}"
	else
		run ours "${ours[@]}"
		[[ -z "$duckdb" ]] || run duckdb "${convert[@]}"
	fi
	if [[ -n "$duckdb" ]]; then
		paste -d' ' <(tail -1 "$work/ours.runs") <(tail -1 "$work/duckdb.runs") |
			awk '{printf "%.3f\n", $1 / $4}' >>"$work/pairs.runs"
	fi
done

echo
echo "optimize distill, $ROWS rows of ~$BYTES bytes (JSONL + messages JSONL + Parquet), median of $RUNS:" \
	"$(median full 1) rows/s, peak RSS $(median full 2) MB, CPU $(median full 3) s;" \
	"all files $(($(du -sb "$work/ds" | cut -f1) / 1048576)) MB"
(($(median full 2) <= 512)) || echo "  optimize distill: peak RSS over the 512 MB budget"
echo "Parquet only from the $(wc -l <"$rows") train rows (zstd $LEVEL, $rg rows/row group, $THREADS threads), medians of $PAIRS:"
echo "  ours:   $(median ours 1) rows/s, peak RSS $(median ours 2) MB, CPU $(median ours 3) s;" \
	"$(($(du -cb "$work/ours/data/"*.parquet | tail -1 | cut -f1) / 1048576)) MB of Parquet"
if [[ -n "$duckdb" ]]; then
	echo "  duckdb: $(median duckdb 1) rows/s, peak RSS $(median duckdb 2) MB, CPU $(median duckdb 3) s" \
		"(with node's start, ~0.15 s); $(($(stat -c %s "$work/duckdb.parquet") / 1048576)) MB of Parquet"
	echo "  ours/duckdb: $(awk -v a="$(median pairs 1)" 'BEGIN {printf "%.2f", a}')x" \
		"(median of the pair ratios $(sort -n "$work/pairs.runs" | tr '\n' ' '))"
fi
