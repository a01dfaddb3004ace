#!/usr/bin/env bash
# native.sh — builds the same numpy and pandas sources natively (gcc, x86-64) against the base build's native
# CPython 3.13.5, as the reference for the sci runtime's differential tests and bench ratios. Run after build.sh
# (it reuses build.sh's work directory: sources, meson, Cython, the native Python).
#
#   pyruntime/sci/native.sh [--work DIR]      # prints the PYTHONPATH to use with <work>/base/native/python
#
# numpy is configured as in the wasm build where it changes results (no BLAS: numpy's lapack-lite), and as a
# native build where it only changes speed (gcc with numpy's default SIMD baseline and dispatch; the source
# carries no svml or x86-simd-sort, as in the wasm build).
set -euo pipefail
work=${WASMBOX_BUILD:-$HOME/.cache/wasmbox-build}/sci
while [ $# -gt 0 ]; do case "$1" in --work) work=$2; shift 2;; *) echo "native.sh: unknown argument $1" >&2; exit 2;; esac; done
die() { echo "sci/native.sh: $*" >&2; exit 1; }
log() { echo "sci/native.sh: $*" >&2; }
native="$work/base/native"; tools="$work/tools"; tpy="$tools/usr/lib/python3/dist-packages"
[ -x "$native/python" ] && [ -d "$work/numpy-src" ] && [ -d "$work/pandas-src" ] || die "run pyruntime/sci/build.sh --with numpy,pandas first (no $work/numpy-src, pandas-src or native python)"
nat="$work/native-ref"; prefix="$nat/site"; mkdir -p "$nat"
rm -rf "$prefix"; mkdir -p "$prefix"
# The uninstalled native Python's sysconfig names an include directory that was never installed: give it one.
inc="$nat/include"; rm -rf "$inc"; mkdir -p "$inc"
cp -a "$work/base/src/Python-3.13.5/Include/." "$inc/"; cp "$native/pyconfig.h" "$inc/"
sd=$(ls "$native"/build/lib.linux-x86_64-3.13/_sysconfigdata_*.py)
sysc="$nat/sysconfig"; rm -rf "$sysc"; mkdir -p "$sysc"
sed -e "s|'INCLUDEPY': '[^']*'|'INCLUDEPY': '$inc'|" -e "s|'CONFINCLUDEPY': '[^']*'|'CONFINCLUDEPY': '$inc'|" "$sd" > "$sysc/$(basename "$sd")"
# pandas' generate_version.py imports versioneer, which Debian's source removed (build.sh's stand-in, alone)
stubs="$nat/stubs"; rm -rf "$stubs"; mkdir -p "$stubs"; cp "$tools/stubs/versioneer.py" "$stubs/"
bin="$nat/bin"; rm -rf "$bin"; mkdir -p "$bin"
cat > "$bin/python3" <<SH
#!/bin/sh
PYTHONPATH="$sysc:$prefix:$stubs:$tpy" _PYTHON_SYSCONFIGDATA_NAME=$(basename "$sd" .py) exec "$native/python" -s "\$@"
SH
# Cython finds numpy's own .pxd (numpy 2 API) in the numpy just installed, not its bundled numpy 1 one
printf '#!/bin/sh\nPYTHONPATH="%s" exec "%s" -s "%s" "$@"\n' "$prefix:$tpy" "$native/python" "$tpy/cython.py" > "$bin/cython"
chmod +x "$bin"/*
# meson 1.7 (pandas) looks for Python.h under the install prefix, which an uninstalled Python does not have
printf "[binaries]\npython = '%s'\ncython = '%s'\n[built-in options]\nc_args = ['-I%s']\ncpp_args = ['-I%s']\n" \
  "$bin/python3" "$bin/cython" "$inc" "$inc" > "$nat/native.ini"
opts="-Dbuildtype=release -Db_ndebug=if-release -Dpython.purelibdir=$prefix -Dpython.platlibdir=$prefix"
t0=$(date +%s)
if [ "${NATIVE_REUSE_NUMPY:-0}" = 1 ] && [ -d "$nat/numpy-build" ]; then
  log "numpy: reinstalling the existing build"
  (cd "$nat/numpy-build" && PYTHONPATH="$tpy" "$bin/python3" "$work/numpy-src/vendored-meson/meson/meson.py" install --no-rebuild > "$nat/numpy-install.log" 2>&1) || die "numpy install failed"
else
log "numpy"
rm -rf "$nat/numpy-build"
(cd "$work/numpy-src" && PYTHONPATH="$tpy" "$bin/python3" vendored-meson/meson/meson.py setup --native-file "$nat/native.ini" $opts \
   -Dallow-noblas=true -Dblas=none -Dlapack=none -Ddisable-svml=true -Ddisable-intel-sort=true "$nat/numpy-build" > "$nat/numpy-setup.log" 2>&1) || { tail -n 30 "$nat/numpy-setup.log" >&2; die "numpy setup failed"; }
(cd "$nat/numpy-build" && PYTHONPATH="$tpy" ninja -j2 > "$nat/numpy-ninja.log" 2>&1 && PYTHONPATH="$tpy" "$bin/python3" "$work/numpy-src/vendored-meson/meson/meson.py" install --no-rebuild > "$nat/numpy-install.log" 2>&1) \
  || { tail -n 30 "$nat/numpy-ninja.log" "$nat/numpy-install.log" >&2; die "numpy build failed"; }
fi
log "pandas"
rm -rf "$nat/pandas-build"
(cd "$work/pandas-src" && PYTHONPATH="$tpy" "$bin/python3" "$tpy/../../../bin/meson" setup --native-file "$nat/native.ini" $opts "$nat/pandas-build" > "$nat/pandas-setup.log" 2>&1) \
  || { tail -n 30 "$nat/pandas-setup.log" >&2; die "pandas setup failed"; }
(cd "$nat/pandas-build" && PYTHONPATH="$tpy" ninja -j2 > "$nat/pandas-ninja.log" 2>&1 && PYTHONPATH="$tpy" "$bin/python3" "$tpy/../../../bin/meson" install --no-rebuild > "$nat/pandas-install.log" 2>&1) \
  || { tail -n 30 "$nat/pandas-ninja.log" "$nat/pandas-install.log" >&2; die "pandas build failed"; }
# pandas' pure-Python dependencies: the same Debian files the sci runtime ships
cp -a "$work/pkg/pydeps/py/." "$prefix/"
log "done in $(( $(date +%s) - t0 )) s"
echo "$prefix"
