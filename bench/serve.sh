#!/usr/bin/env bash
# Benchmark of optimize serve (make bench): added latency over a direct call
# at 1,000 req/s, throughput against nginx proxy_pass to the same upstream,
# RSS with 2,000 connections held for 60 s, and 20 conversations of 60
# tool-using turns with the summarizer slowed to 0.3, 1.5 and 5 s; see
# bench/serve/main.go and bench/serve/compaction.go.
# nginx is Debian's, unpacked into .cache/nginx (no service is installed or
# started). Everything listens on 127.0.0.1.
#
#   bench/serve.sh
#   HOLD=20s CONNS=500 bench/serve.sh      # a shorter memory run
#   PHASES=throughput ROUNDS=9 bench/serve.sh   # only the nginx comparison
#   BASELINE=/path/to/optimize bench/serve.sh   # another build measured beside
#                                               # this one, paired, in every phase
#   KEEP_TOKENS=-1 LINK_CONCURRENCY=20 bench/serve.sh   # this build's compaction
#       settings (default 0: serve's own defaults, as shipped); a baseline
#       runs with its own defaults
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

nginx="$root/.cache/nginx/usr/sbin/nginx"
if [[ ! -x "$nginx" ]]; then
	mkdir -p .cache/nginx
	(cd .cache/nginx && apt-get download nginx >/dev/null && dpkg -x nginx_*.deb . && rm -f nginx_*.deb)
fi
"$nginx" -v

go build -o bin/optimize ./cmd/optimize
go run ./bench/serve --optimize bin/optimize --nginx "$nginx" \
	--phases "${PHASES:-latency,throughput,memory,compaction}" --rounds "${ROUNDS:-5}" \
	--baseline "${BASELINE:-}" \
	--keep-tokens "${KEEP_TOKENS:-0}" --link-concurrency "${LINK_CONCURRENCY:-0}" \
	--rate "${RATE:-1000}" --conns "${CONNS:-2000}" --hold-for "${HOLD:-60s}"
