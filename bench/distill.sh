#!/usr/bin/env bash
# Benchmark of the distillation export (make bench), in two parts.
#
# 1. Parquet only, at matched settings: ours (distill.Writer with
#    ParquetOnly) and DuckDB both read the same JSONL rows and write only
#    Parquet, with the same codec and level (zstd level 1: ours calls libzstd
#    through cgo as DuckDB does; with CGO_ENABLED=0 it falls back to
#    klauspost's pure-Go SpeedFastest, about level 1 and slower), the same
#    row-group size (DuckDB takes ROWS_RG as a target and cuts row groups at
#    its read batches, so a first DuckDB run measures the mean size it writes
#    and ours is given that) and the same thread count (GOMAXPROCS and the
#    writer's concurrency for ours, DuckDB's threads; and both processes
#    pinned to THREADS cores with taskset, since GOMAXPROCS does not count
#    the threads inside cgo calls to libzstd). DuckDB is given the rows'
#    columns, which ours has compiled in, so that neither infers a schema.
#    Both write min/max statistics (strings truncated to 64 bytes; DuckDB's
#    content bounds are shorter) and dictionaries; DuckDB also writes bloom
#    filters for its dictionary chunks (tens of bytes each) and ours CRC-32s
#    of its pages and a file per split. They run in pairs,
#    REPEAT times, alternating which goes first; the figures are medians:
#    rows/s, peak RSS (GNU time), and the ratio ours/DuckDB as the median of
#    the pairs' ratios (each pair ran under about the same load), and each
#    process's CPU seconds, which load disturbs less than the rate. Goal:
#    ratio >= 1.0, peak RSS < 512 MB.
# 2. The full export (JSONL + messages JSONL + Parquet), ours alone, at the
#    same settings: what `optimize distill` does. It does more work than
#    DuckDB's Parquet-only run, so it is not compared with it.
#
# The page cache is written back before each run (a run should not pay for
# the previous one's writeback).
#
#   bench/distill.sh                      # 60,000 rows of ~6 KB, 5 pairs
#   ROWS=20000 REPEAT=3 bench/distill.sh
#   THREADS=1 ROWS_RG=8192 bench/distill.sh
#   KEEP=1 bench/distill.sh               # keep the work directory
set -euo pipefail

ROWS=${ROWS:-60000}
BYTES=${BYTES:-6000}
REPEAT=${REPEAT:-5}
THREADS=${THREADS:-2}
ROWS_RG=${ROWS_RG:-2048}
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

# libzstd at -O3, as the Makefile builds it (and as DuckDB's is built).
CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}" go build -o "$work/distill-bench" ./bench/distill

echo "generating $ROWS rows of ~$BYTES bytes..."
"$work/distill-bench" gen -rows "$ROWS" -bytes "$BYTES" -out "$work/rows.jsonl"
echo "input: $(( $(stat -c %s "$work/rows.jsonl") / 1048576 )) MB of JSONL;" \
	"settings: zstd level $LEVEL, $ROWS_RG rows per row group, $THREADS threads"

duckdb=yes
if [[ ! -d "$root/.cache/node/node_modules/@duckdb/node-api" ]] || ! command -v node >/dev/null 2>&1; then
	duckdb=
	echo "DuckDB not installed (run scripts/install-test-tools.sh): no reference figure"
fi

# run NAME CMD... runs a command after writing back the page cache and
# records its rows/s (from its "N rows/s" line), peak RSS in MB and CPU
# seconds (user + system, the whole process).
run() {
	local name=$1
	shift
	sync
	local out rate rss cpu
	out=$(/usr/bin/time -f "peak_rss_kb %M cpu_s %U %S" "$@" 2>&1)
	rss=$(( $(awk '/^peak_rss_kb/ {print $2}' <<<"$out") / 1024 ))
	cpu=$(awk '/^peak_rss_kb/ {printf "%.2f", $4 + $5}' <<<"$out")
	out=$(grep -v '^peak_rss_kb' <<<"$out")
	rate=$(grep -o '[0-9]* rows/s' <<<"$out" | head -1 | cut -d' ' -f1)
	echo "  $out (peak RSS $rss MB, CPU $cpu s)"
	echo "$rate $rss $cpu" >>"$work/$name.runs"
}

# Both sides run on the same THREADS cores.
pin=()
if command -v taskset >/dev/null 2>&1 && (( THREADS <= $(nproc) )); then
	pin=(taskset -c "0-$((THREADS - 1))")
else
	echo "taskset missing or THREADS > cores: the processes are not pinned"
fi
rg=$ROWS_RG
if [[ -n "$duckdb" ]]; then
	cal=$("${pin[@]}" node bench/distill/duckdb-convert.mjs "$work/rows.jsonl" "$work/duckdb.parquet" "$LEVEL" "$ROWS_RG" "$THREADS")
	rg=$(grep -o 'mean [0-9]* rows' <<<"$cal" | cut -d' ' -f2)
	echo "DuckDB writes row groups of $rg rows on average for a target of $ROWS_RG: ours writes $rg"
fi
ours=("${pin[@]}" env GOMAXPROCS="$THREADS" "$work/distill-bench" export -in "$work/rows.jsonl"
	-row-group-rows "$rg" -row-group-bytes 1073741824 -concurrency "$THREADS")
for i in $(seq "$REPEAT"); do
	echo "== pair $i/$REPEAT (Parquet only)"
	rm -rf "$work/ours" "$work/duckdb.parquet"
	# Odd pairs run ours first, even pairs DuckDB first, so neither side
	# always inherits the other's cache state or a load spike's tail.
	if (( i % 2 == 0 )) && [[ -n "$duckdb" ]]; then
		run duckdb "${pin[@]}" node bench/distill/duckdb-convert.mjs "$work/rows.jsonl" "$work/duckdb.parquet" "$LEVEL" "$ROWS_RG" "$THREADS"
		run ours "${ours[@]}" -out "$work/ours" -parquet-only
	else
		run ours "${ours[@]}" -out "$work/ours" -parquet-only
		if [[ -n "$duckdb" ]]; then
			run duckdb "${pin[@]}" node bench/distill/duckdb-convert.mjs "$work/rows.jsonl" "$work/duckdb.parquet" "$LEVEL" "$ROWS_RG" "$THREADS"
		fi
	fi
	if [[ -n "$duckdb" ]]; then
		# The ratio of this pair's rates: both ran seconds apart, under
		# about the same load.
		paste -d' ' <(tail -1 "$work/ours.runs") <(tail -1 "$work/duckdb.runs") |
			awk '{printf "%.3f\n", $1 / $4}' >>"$work/pairs.runs"
		echo "  pair ratio ours/duckdb: $(tail -1 "$work/pairs.runs")"
	fi
done
ours_pq=$(( $(du -cb "$work/ours/data/"*.parquet | tail -1 | cut -f1) / 1048576 ))
for i in $(seq "$REPEAT"); do
	echo "== full export $i/$REPEAT"
	rm -rf "$work/full"
	run full "${ours[@]}" -out "$work/full"
done

# median NAME COLUMN prints the median of a column of NAME's runs.
median() { cut -d' ' -f"$2" "$work/$1.runs" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo
echo "Parquet only, matched settings (zstd $LEVEL, $rg rows/row group, $THREADS threads), medians of $REPEAT paired runs:"
echo "  ours:   $(median ours 1) rows/s, peak RSS $(median ours 2) MB, CPU $(median ours 3) s; $ours_pq MB of Parquet"
if [[ -n "$duckdb" ]]; then
	echo "  duckdb: $(median duckdb 1) rows/s, peak RSS $(median duckdb 2) MB, CPU $(median duckdb 3) s (with node's start, ~0.15 s); $(( $(stat -c %s "$work/duckdb.parquet") / 1048576 )) MB of Parquet"
	ratio=$(awk -v a="$(median pairs 1)" 'BEGIN {printf "%.2f", a}')
	verdict="at least DuckDB's speed"
	awk -v r="$ratio" 'BEGIN {exit !(r < 1)}' && verdict="SLOWER than DuckDB"
	echo "  ours/duckdb: ${ratio}x (median of the $REPEAT pair ratios $(sort -n "$work/pairs.runs" | tr '\n' ' ')): $verdict"
	echo "  ratio of the median rates: $(awk -v a="$(median ours 1)" -v b="$(median duckdb 1)" 'BEGIN {printf "%.2f", a / b}')x"
fi
((  $(median ours 2) < 512 )) || echo "  ours: peak RSS over the 512 MB budget"
echo "Full export (JSONL + messages JSONL + Parquet), ours, same settings, median of $REPEAT:" \
	"$(median full 1) rows/s, peak RSS $(median full 2) MB; all files $(( $(du -sb "$work/full" | cut -f1) / 1048576 )) MB"
