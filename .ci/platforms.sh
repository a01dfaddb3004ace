#!/usr/bin/env bash
# Platforms: the pure-Go build (CGO_ENABLED=0) for windows/amd64, darwin/arm64, darwin/amd64 and linux/arm64,
# then a smoke test of the linux/arm64 binaries under qemu-user-static (Debian's): a run, a tool call through
# the gate, and a deadline that stops a busy loop. The arm64 compile of the interpreter under emulation takes
# about 40 s; it goes to a temporary cache directory, never the user's.
#
#   .ci/platforms.sh              both phases
#   .ci/platforms.sh build DIR    the builds only, leaving the linux/arm64 binaries in DIR
#   .ci/platforms.sh smoke DIR    the smoke test of the binaries in DIR
#
# .ci/run starts the build phase in the background while it installs the test engines (which wait on the
# network, not the CPU), and runs the smoke test at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
step() { echo "platforms: $1 ($(( $(date +%s) - t0 )) s)"; }
phase=${1:-all}
case "$phase" in
	all) bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT;;
	build|smoke) bin=${2:?usage: platforms.sh build|smoke DIR}; mkdir -p "$bin";;
	*) echo "platforms.sh: unknown phase $phase" >&2; exit 2;;
esac

if [ "$phase" != smoke ]; then
	for p in windows/amd64 darwin/arm64 darwin/amd64 linux/arm64; do
		s=$(date +%s)
		CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build ./...
		CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go vet ./...
		echo "platforms: $p: go build ./... and go vet ./... with CGO_ENABLED=0 ok in $(( $(date +%s) - s )) s"
	done
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -o "$bin/wasmbox" ./cmd/wasmbox
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -o "$bin/orders" ./examples/orders
	file "$bin/wasmbox" 2>/dev/null || true
	step "linux/arm64 binaries built"
	if [ "$phase" = build ]; then exit 0; fi
fi
[ -x "$bin/wasmbox" ] && [ -x "$bin/orders" ] || { echo "platforms: no linux/arm64 binaries in $bin (run the build phase first)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ "$phase" != all ] || rm -rf "$bin"' EXIT
if ! command -v qemu-aarch64-static >/dev/null; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq qemu-user-static >/dev/null
fi
qemu-aarch64-static --version | head -1
step "qemu ready"

# The cache (compiled interpreter, snapshots) lives in the temporary directory.
export XDG_CACHE_HOME="$tmp/cache" HOME="$tmp/home"
mkdir -p "$XDG_CACHE_HOME" "$HOME"
arm() { qemu-aarch64-static "$@"; }

s=$(date +%s)
out=$(arm "$bin/wasmbox" run -c 'import platform, sys; print(6 * 7, sys.platform, platform.machine() or "wasm32")')
echo "run (first, compiles for arm64): $out [$(( $(date +%s) - s )) s]"
[ "${out%% *}" = 42 ] || { echo "platforms: want 42 first"; exit 1; }

s=$(date +%s)
out=$(arm "$bin/wasmbox" run -c 'print(sum(range(10**6)))')
echo "run (cached): $out [$(( $(date +%s) - s )) s]"
[ "$out" = 499999500000 ] || { echo "platforms: wrong sum"; exit 1; }

# A tool call: the orders example registers the seed shop's tools; its program calls list_orders and get_order
# through the gate.
s=$(date +%s)
out=$(arm "$bin/orders" -code examples/orders/testdata/eu_total.py -approve deny)
echo "tool calls (examples/orders, eu_total.py):"
echo "$out" | sed 's/^/  /'
echo "  [$(( $(date +%s) - s )) s]"
echo "$out" | grep -Eq '^tool_calls: [1-9][0-9]* allowed, 0 denied$' || { echo "platforms: no allowed tool calls"; exit 1; }

# A deadline: a busy loop is stopped at its time limit and the CLI exits 124.
s=$(date +%s)
set +e
arm "$bin/wasmbox" run --timeout 2s -c 'while True: pass'
rc=$?
set -e
echo "deadline (while True: pass, --timeout 2s): exit $rc [$(( $(date +%s) - s )) s]"
[ "$rc" = 124 ] || { echo "platforms: want exit 124"; exit 1; }
step "qemu smoke test passed"
