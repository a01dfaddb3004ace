#!/usr/bin/env bash
# update.sh — copies the artifacts of a sci build (pyruntime/sci/build.sh --with numpy,pandas --out DIR) into this
# module and writes their SHA256SUMS, which Load checks. The build's tzdata.zip must be the base runtime's (the
# module uses that one).
#
#   sci/update.sh [DIR]        # default: build/sci
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")
src=${1:-$repo/build/sci}
die() { echo "sci/update.sh: $*" >&2; exit 1; }
for f in python.wasm python.wasm.gz stdlib.zip tzdata.zip BUILDINFO; do [ -f "$src/$f" ] || die "no $f in $src"; done
grep -q 'numpy' "$src/BUILDINFO" && grep -q 'pandas' "$src/BUILDINFO" || die "$src is not a numpy,pandas build (see its BUILDINFO)"
cmp -s "$src/tzdata.zip" "$repo/assets/tzdata.zip" || die "$src/tzdata.zip differs from assets/tzdata.zip: rebuild against this checkout's base"
gzip -t "$src/python.wasm.gz" || die "$src/python.wasm.gz is not a valid gzip file"
[ "$(gzip -dc "$src/python.wasm.gz" | sha256sum | cut -d' ' -f1)" = "$(sha256sum < "$src/python.wasm" | cut -d' ' -f1)" ] \
  || die "$src/python.wasm.gz does not decompress to $src/python.wasm"
cp "$src/python.wasm.gz" "$src/stdlib.zip" "$src/BUILDINFO" "$here/"
(cd "$src" && sha256sum python.wasm) > "$here/SHA256SUMS"
(cd "$here" && sha256sum python.wasm.gz stdlib.zip BUILDINFO) >> "$here/SHA256SUMS"
echo "sci/update.sh: updated from $src"; cat "$here/SHA256SUMS"
