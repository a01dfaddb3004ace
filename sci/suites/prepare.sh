#!/usr/bin/env bash
# prepare.sh — lays out the workspace that sci/suites runs in: pytest and its imports (Debian's arch:all
# packages, pinned in pyruntime/sci/versions.env and inputs.sha256), numpy's tests (from Debian's python3-numpy
# 2.2.4, the same version the sci runtime is built from) and pandas' tests (from pandas' 2.2.3 source), each
# under t/ as in the package, and runsuite.py.
#
#   sci/suites/prepare.sh [DIR]      # default: build/sci-suites/ws of this repository
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$repo/pyruntime/sci/versions.env"
ws=${1:-$repo/build/sci-suites/ws}
dl=${XDG_CACHE_HOME:-$HOME/.cache}/wasmbox-build/dl-sci
"$repo/pyruntime/sci/fetch.sh" "$dl" numpydev pandas suites >&2
files="$NUMPYBIN_DEB $PANDAS_ORIG"
for pv in $SUITE_DEBS; do files="$files ${pv%%=*}_${pv#*=}_all.deb"; done
for f in $files; do
  (cd "$dl" && grep "  $f\$" "$repo/pyruntime/sci/inputs.sha256" | sha256sum -c --quiet -) || { echo "prepare.sh: checksum mismatch or no pin: $f" >&2; exit 1; }
done
rm -rf "$ws"; mkdir -p "$ws/site" "$ws/t"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for pv in $SUITE_DEBS; do dpkg-deb -x "$dl/${pv%%=*}_${pv#*=}_all.deb" "$tmp/site"; done
cp -a "$tmp/site/usr/lib/python3/dist-packages/." "$ws/site/"
# numpy: every tests directory and the top conftest.py (the suites of f2py, distutils and typing build or type
# check code, which the sandbox cannot: left out)
dpkg-deb -x "$dl/$NUMPYBIN_DEB" "$tmp/numpy"
src="$tmp/numpy/usr/lib/python3/dist-packages"
(cd "$src" && find numpy -type d -name tests -not -path 'numpy/f2py/*' -not -path 'numpy/distutils/*' -not -path 'numpy/typing/*' -not -path 'numpy/_pyinstaller/*' \
  | while read -r d; do mkdir -p "$ws/t/$d" && cp -a "$d/." "$ws/t/$d/"; done)
cp "$src/numpy/conftest.py" "$ws/t/numpy/"
# pandas: pandas/tests and the top conftest.py, from the source the runtime was built from
tar -xJf "$dl/$PANDAS_ORIG" -C "$tmp" --wildcards '*/pandas/tests/*' '*/pandas/conftest.py'
psrc=$(ls -d "$tmp"/pandas-*/pandas)
mkdir -p "$ws/t/pandas"; cp -a "$psrc/tests" "$psrc/conftest.py" "$ws/t/pandas/"
cp "$here/runsuite.py" "$ws/"
echo "prepare.sh: $(du -sh "$ws" | cut -f1) in $ws" >&2
echo "$ws"
