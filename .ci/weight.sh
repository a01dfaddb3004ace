#!/usr/bin/env bash
# Dependency weight: what an application that imports only the sandbox package downloads.
#
# A throwaway module in a temporary directory imports github.com/wasmbox/wasmbox/wasmbox, replaces it with this
# checkout, and runs `go mod tidy` against a fresh, empty module cache. The sum of the module zips it downloaded
# (this checkout excluded: it comes from the replace) must stay within the budget. The Go module proxy is the only
# network this needs.
#
#   .ci/weight.sh            measure and check (budget: WASMBOX_WEIGHT_MAX_MB, default 20)
#   .ci/weight.sh -v         also list every downloaded zip
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
max_mb=${WASMBOX_WEIGHT_MAX_MB:-20}
verbose=${1:-}

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/app" "$tmp/modcache" "$tmp/gocache"
cat > "$tmp/app/go.mod" <<MOD
module example.com/weightcheck

go 1.26

require github.com/wasmbox/wasmbox v0.0.0

replace github.com/wasmbox/wasmbox => $repo
MOD
cat > "$tmp/app/main.go" <<'SRC'
package main

import (
	"context"
	"fmt"

	"github.com/wasmbox/wasmbox/wasmbox"
)

func main() {
	sb, err := wasmbox.New(context.Background(), wasmbox.Config{})
	fmt.Println(sb, err)
}
SRC
cd "$tmp/app"
export GOMODCACHE="$tmp/modcache" GOCACHE="$tmp/gocache" GOFLAGS=-modcacherw GOWORK=off
start=$(date +%s)
go mod tidy
go build -o /dev/null . # the graph tidy chose really builds the sandbox
mods=$(go list -m all | wc -l)
zips=$(find "$GOMODCACHE/cache/download" -name '*.zip' | grep -v '/github.com/wasmbox/wasmbox/' || true)
bytes=0
list=""
for z in $zips; do
	sz=$(stat -c %s "$z")
	bytes=$((bytes + sz))
	rel=${z#"$GOMODCACHE/cache/download/"}
	list+="$sz ${rel%.zip}"$'\n'
done
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1000000 }')
echo "weight: $mods modules in go list -m all, $(printf '%s' "$zips" | grep -c . || true) zips downloaded, $mb MB ($bytes bytes); $(( $(date +%s) - start )) s"
echo "biggest zips:"
printf '%s' "$list" | sort -rn | head -${WEIGHT_TOP:-8} | awk '{ printf "  %6.1f MB  %s\n", $1 / 1000000, $2 }'
if [ "$verbose" = -v ]; then
	echo "all zips:"
	printf '%s' "$list" | sort -rn | awk '{ printf "  %8d  %s\n", $1, $2 }'
	echo "imported third-party packages:"
	go list -deps . | grep '\.' | grep -v '^github.com/wasmbox/' | grep -v '^vendor/' | sed 's/^/  /'
fi
if [ "$bytes" -gt $((max_mb * 1000000)) ]; then
	echo "weight: $mb MB of module downloads is above the budget of $max_mb MB"
	exit 1
fi
echo "weight: within the budget of $max_mb MB"
