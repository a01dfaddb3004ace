#!/usr/bin/env bash
# record-native.sh — runs analysis.py with native numpy and pandas (pyruntime/sci/native.sh: the same sources
# built with gcc for x86-64) and writes analysis.native.txt, the output the sci runtime must reproduce.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${WASMBOX_BUILD:-$HOME/.cache/wasmbox-build}/sci
site="$work/native-ref/site"
[ -d "$site/numpy" ] && [ -d "$site/pandas" ] || { echo "record-native.sh: run pyruntime/sci/native.sh first" >&2; exit 1; }
PYTHONPATH="$site" PYTHONHASHSEED=0 TZ=UTC "$work/base/native/python" -s -E -c "import sys; sys.path.insert(0, '$site'); exec(open('$here/analysis.py').read())" > "$here/analysis.native.txt"
echo "record-native.sh: wrote $here/analysis.native.txt"
