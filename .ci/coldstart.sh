#!/usr/bin/env bash
# Tests never touch the user's wasmbox cache: run a package whose tests compile the interpreter (through the CLI)
# and the cache tests with HOME and XDG_CACHE_HOME pointing at empty directories, then check that nothing named
# wasmbox appeared there. Needs only Go.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/home" "$tmp/xdg"
echo "--- tests leave the user's cache alone"
env GOCACHE="$(go env GOCACHE)" GOMODCACHE="$(go env GOMODCACHE)" GOPATH="$(go env GOPATH)" \
	HOME="$tmp/home" XDG_CACHE_HOME="$tmp/xdg" WASMBOX_TEST_CACHE= \
	go test -count=1 -run 'TestRunExitCodes|TestArtifactCache|TestCacheCap' ./internal/cli/ ./wasmbox/
if found=$(find "$tmp/home" "$tmp/xdg" -iname '*wasmbox*' | head -5) && [ -n "$found" ]; then
	echo "the tests wrote into the user's cache: $found"
	exit 1
fi
echo "the user's cache was not touched"
