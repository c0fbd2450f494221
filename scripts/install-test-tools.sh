#!/usr/bin/env bash
# Installs the tools the tests use to read our output with a second, independent
# implementation: DuckDB's Node API into .cache/node (ignored by git).
# Idempotent: returns at once when the pinned version is already installed.
set -euo pipefail

DUCKDB_NODE_API_VERSION=1.5.6-r.1

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="$root/.cache/node"
pkg="$prefix/node_modules/@duckdb/node-api/package.json"

if [[ -f "$pkg" ]] && grep -q "\"version\": \"$DUCKDB_NODE_API_VERSION\"" "$pkg"; then
	echo "install-test-tools: @duckdb/node-api@$DUCKDB_NODE_API_VERSION already installed in $prefix"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	echo "install-test-tools: npm not found; install Node.js 20 or later" >&2
	exit 1
fi

mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
	"@duckdb/node-api@$DUCKDB_NODE_API_VERSION"
echo "install-test-tools: installed @duckdb/node-api@$DUCKDB_NODE_API_VERSION in $prefix"
