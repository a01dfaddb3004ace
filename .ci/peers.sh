#!/usr/bin/env bash
# Installs the peer sandboxes that bench/compare measures beside wasmbox (pinned npm packages, into a cache
# directory outside the repository), then runs bench/compare briefly and checks that the peer rows have figures.
# Needs node and npm. WASMBOX_PEERS_DIR overrides the directory (bench/compare reads the same variable).
set -euo pipefail
cd "$(dirname "$0")/.."
PYODIDE_VERSION=314.0.8
MONTY_VERSION=0.0.18
dir=${WASMBOX_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/wasmbox-peers}
mkdir -p "$dir"
want="pyodide@$PYODIDE_VERSION @pydantic/monty@$MONTY_VERSION"
if [ "$(cat "$dir/.installed" 2>/dev/null || true)" != "$want" ]; then
  [ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --save-exact $want)
  echo "$want" > "$dir/.installed"
fi
export WASMBOX_PEERS_DIR=$dir
out=$(go run ./bench/compare -quick -json)
echo "$out"
# Every peer row must have its figures: a missing package or a failed workload is a CI failure, not a blank.
node -e '
const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
let bad = [];
for (const p of ["pyodide", "monty"]) {
  const row = r.peers && r.peers[p];
  if (!row) { bad.push(p + ": no row"); continue; }
  for (const k of ["fresh_run_p50_ms", "w1_seconds", "w2_seconds", "tool_call_us"]) if (!(row[k] > 0)) bad.push(p + ": no " + k);
  if (row.errors) bad.push(p + ": " + row.errors.join("; "));
}
// The sci runtime row (a child built from the sci module): its fresh run, import and workloads.
if (!(r.sci_fresh_run_p50_ms > 0) || !(r.sci_import_ms > 0) || !(r.sci && r.sci.workloads && r.sci.workloads.length === 3 && r.sci.workloads.every(w => w.seconds > 0))) bad.push("sci: no row (" + (r.skipped || []).filter(s => s.startsWith("sci")).join("; ") + ")");
// P2 with the wasmtime engine (its program is built from the nested module; gcc is on every CI machine).
if (!(r.p2 && r.p2.wasmtime_warm_cache && r.p2.wasmtime_warm_cache.median_ms > 0)) bad.push("P2: no wasmtime figure: " + JSON.stringify((r.p2 && r.p2.unavailable) || r.skipped || null));
// P3 (its wasmtime clause): the engine table has a wasmtime row, measured by the child built from its module.
const wt = r.engines && r.engines.wasmtime;
if (!(wt && wt.w1_seconds > 0 && wt.w2_seconds > 0)) bad.push("engines: no wasmtime row: " + JSON.stringify(r.skipped || null));
if (bad.length) { console.error("peers:", bad.join("\n")); process.exit(1); }
console.log("peers: pyodide and monty measured");
' <<<"$out"
