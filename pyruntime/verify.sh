#!/usr/bin/env bash
# verify.sh — rebuild the interpreter in a fresh work folder and output folder, then compare every artifact's
# SHA-256 with the committed assets/SHA256SUMS. Exit 0 when identical.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/wasmbox-verify.XXXXXX")
"$here/build.sh" --work "$tmp/work" --out "$tmp/out"
if diff -u "$repo/assets/SHA256SUMS" "$tmp/out/SHA256SUMS"; then
  echo "verify: identical to assets/SHA256SUMS"
  rm -rf "$tmp"
else
  echo "verify: artifacts differ (kept in $tmp)" >&2
  exit 1
fi
