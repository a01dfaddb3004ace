#!/usr/bin/env bash
# run.sh PYTHON INCLUDE_DIRS... — checks _wasmbox's C paths natively: builds wasmboxmodule.c as an extension of
# a native CPython of the same version, with shim.c standing in for the host, and runs check.py with it.
# pyruntime/build.sh runs it with its native build Python before the cross build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=$1; shift
inc=(); for d in "$@"; do inc+=(-I "$d"); done
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
cc=${CC_NATIVE:-cc}
"$cc" -shared -fPIC -O2 -Wall -Wno-unknown-attributes -Wno-attributes "${inc[@]}" \
  "$here/../wasmboxmodule.c" "$here/shim.c" -o "$out/_wasmbox$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
PYTHONPATH="$out" "$py" -I -c 'import sys; sys.path.insert(0, sys.argv[1]); exec(open(sys.argv[2]).read())' "$out" "$here/check.py"
