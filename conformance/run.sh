#!/usr/bin/env bash
# conformance/run.sh [full|ci|test_a,test_b] [--update]
# Runs CPython 3.13.5's own Lib/test modules (conformance/modules.txt) in the sandbox and natively, prints the
# per-module table, and fails on any difference from conformance/expectations.txt (--update rewrites it instead).
# Lib/test comes from the same pinned, hash-checked tarball the interpreter is built from (pyruntime/fetch.sh,
# pyruntime/inputs.sha256). The native CPython is built once from that tarball into the cache (about 5 minutes on
# 2 cores), unless WASMBOX_CONFORMANCE_NATIVE names one; the ci set skips it and compares the sandbox only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$repo/pyruntime/versions.env"
set_=${1:-full}
update=0
[ "${2:-}" = "--update" ] && update=1
cache=${XDG_CACHE_HOME:-$HOME/.cache}/wasmbox-conformance
tarball=python3.13_${PYTHON_VERSION}.orig.tar.xz
mkdir -p "$cache"
log() { echo "conformance: $*" >&2; }

if [ ! -s "$cache/dl/$tarball" ]; then
  log "fetching the pinned sources (pyruntime/fetch.sh)"
  "$repo/pyruntime/fetch.sh" "$cache/dl" >&2
fi
want=$(awk -v f="$tarball" '$2 == f {print $1}' "$repo/pyruntime/inputs.sha256")
[ -n "$want" ] || { log "no hash for $tarball in pyruntime/inputs.sha256"; exit 1; }
got=$(sha256sum "$cache/dl/$tarball" | cut -d' ' -f1)
[ "$got" = "$want" ] || { log "$tarball: sha256 $got, want $want"; exit 1; }
src="$cache/src/Python-$PYTHON_VERSION"
if [ "$(cat "$cache/src/.sha256" 2>/dev/null)" != "$want" ]; then
  log "extracting $tarball"
  rm -rf "$cache/src"; mkdir -p "$cache/src"
  tar -xJf "$cache/dl/$tarball" -C "$cache/src"
  echo "$want" > "$cache/src/.sha256"
fi

native=${WASMBOX_CONFORMANCE_NATIVE:-}
if [ -z "$native" ] && [ "$set_" != ci ]; then
  native="$cache/native/python"
  if [ ! -x "$native" ] || [ "$(cat "$cache/native/.sha256" 2>/dev/null)" != "$want" ]; then
    log "building native CPython $PYTHON_VERSION from the same tarball (once; about 5 minutes)"
    rm -rf "$cache/native"; mkdir -p "$cache/native"
    (cd "$cache/native" && "$src/configure" -q >/dev/null && make -s -j"$(nproc)" >/dev/null 2>&1)
    echo "$want" > "$cache/native/.sha256"
  fi
fi

out=${WASMBOX_CONFORMANCE_OUTDIR:-$cache/out/$set_}
rm -rf "$out"; mkdir -p "$(dirname "$out")"
log "running set '$set_'${native:+ (native: $native)}"
rc=0
(cd "$repo/conformance" && WASMBOX_CONFORMANCE_LIB="$src/Lib" WASMBOX_CONFORMANCE_NATIVE="$native" \
  WASMBOX_CONFORMANCE_SET="$set_" WASMBOX_CONFORMANCE_UPDATE="$update" WASMBOX_CONFORMANCE_OUT="$out" \
  go test -count=1 -v -timeout 6h -run '^TestConformance$' . > "$out.log" 2>&1) || rc=$?
grep -E '^\s+conformance_test.go:[0-9]+: test_' "$out.log" | sed 's/^ *conformance_test.go:[0-9]*: //' >&2 || true
if [ -s "$out/table.md" ]; then cat "$out/table.md"; fi
if [ $rc -ne 0 ]; then
  sed -n '/differences from/,$p' "$out.log" | head -200 >&2
  grep -E '^(panic|FAIL|---)' "$out.log" >&2 || true
  log "failed (full log: $out.log)"
fi
exit $rc
