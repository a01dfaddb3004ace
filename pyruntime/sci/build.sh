#!/usr/bin/env bash
# build.sh — build the "sci" interpreter: the base wasmbox CPython 3.13 (pyruntime/build.sh) with C/C++ extension
# packages linked in statically as builtin modules (WASI preview 1 has no dlopen), their Python files in the stdlib
# zip, and the same reactor, loop-counter instrumentation and import check as the base build.
#
#   pyruntime/sci/build.sh [--with PKGS] [--sources DIR] [--out DIR] [--work DIR] [--reuse-base] [--no-install]
#
# --with        comma-separated packages: numpy (the default), selftest (the probe package in selftest/, which
#               proves the route without numpy: dotted builtins, C++ with libc++, a C loop stopped by the deadline)
# --sources     a directory holding inputs the package archive does not serve (numpy's source, NUMPY_SRC in
#               versions.env); each is checked against inputs.sha256
# --out         where the artifacts go (default: build/sci of this repository; gitignored)
# --work        build directory (default: $XDG_CACHE_HOME/wasmbox-build/sci)
# --reuse-base  skip the base build when <work>/base already holds one (saves ~8 min)
#
# Artifacts: python.wasm (instrumented, stripped), python.wasm.gz, stdlib.zip (base stdlib + packages),
# tzdata.zip (the base build's), BUILDINFO, SHA256SUMS.
#
# How a package is linked: each package step leaves <work>/pkg/<name>/modules.txt, one line per extension module,
# "dotted.module.name PyInit_symbol", and <work>/pkg/<name>/lib/*.a (its objects and helper libraries) and
# <work>/pkg/<name>/py/ (its Python files). The link step adds one inittab entry per module to a copy of the base
# build's Modules/config.c (CPython 3.13's BuiltinImporter finds dotted builtins under their package: no custom
# importer is needed) and relinks the reactor with every archive.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$repo/pyruntime/versions.env"
. "$here/versions.env"
export SOURCE_DATE_EPOCH LC_ALL=C TZ=UTC

with=numpy; out="$repo/build/sci"; work=""; reuse=0; install=1; sources=
while [ $# -gt 0 ]; do
  case "$1" in
    --with) with=$2; shift 2;;
    --out) out=$2; shift 2;;
    --sources) sources=$2; shift 2;;
    --work) work=$2; shift 2;;
    --reuse-base) reuse=1; shift;;
    --no-install) install=0; shift;;
    *) echo "sci/build.sh: unknown argument $1" >&2; exit 2;;
  esac
done
cache=${XDG_CACHE_HOME:-$HOME/.cache}/wasmbox-build
work=${work:-$cache/sci}
mkdir -p "$work" "$out"
work=$(cd "$work" && pwd); out=$(cd "$out" && pwd)
dl="$cache/dl-sci"
log() { echo "sci/build.sh: $*" >&2; }
die() { echo "sci/build.sh: $*" >&2; exit 1; }
t0=$(date +%s)
pkgs=${with//,/ }
for p in $pkgs; do case "$p" in numpy|pandas|selftest) ;; *) die "unknown package $p";; esac; done

# --- toolchain: the base one plus libc++ for wasm32 and ninja ----------------------------------------------
if ! [ -f /usr/lib/llvm-19/lib/wasm32-wasi/libc++.a ] || ! command -v ninja >/dev/null; then
  [ "$install" = 1 ] || die "libc++ for wasm32 or ninja missing and --no-install given"
  log "installing $SCI_TOOLCHAIN_PACKAGES"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $SCI_TOOLCHAIN_PACKAGES >/dev/null
fi

# --- inputs (fetched and checked before the long base build, so a missing input fails at once) ---------------
parts=""
for p in $pkgs; do case "$p" in numpy) parts="$parts tools";; pandas) parts="$parts tools numpydev pandas pydeps";; esac; done
if [ -n "$parts" ]; then
  "$here/fetch.sh" "$dl" $parts
  for part in $parts; do
    case "$part" in
      tools) files="$MESON_DEB $CYTHON_DEB $MESONPY_DEB";;
      pandas) files="$PANDAS_ORIG";;
      numpydev) files="$NUMPYDEV_DEB $NUMPYBIN_DEB";;
      pydeps) files="$DATEUTIL_DEB $SIX_DEB $PYTZ_DEB";;
    esac
    for f in $files; do
      (cd "$dl" && grep "  $f\$" "$here/inputs.sha256" | sha256sum -c --quiet -) || die "checksum mismatch or no pin: $f"
    done
  done
fi

# numpy's source: not served by the archive these machines reach; taken from --sources (or the downloads dir).
numpy_src=""
if [[ " $pkgs " == *" numpy "* ]]; then
  for d in "$sources" "$dl"; do
    [ -n "$d" ] && [ -f "$d/$NUMPY_SRC" ] && { numpy_src="$d/$NUMPY_SRC"; break; }
  done
  pin=$(grep "  $NUMPY_SRC\$" "$here/inputs.sha256" | cut -d' ' -f1)
  [ -n "$numpy_src" ] || die "numpy: put $NUMPY_SRC (sha256 $pin: $NUMPY_SRC_UPSTREAM) in a directory and pass --sources DIR"
  echo "$pin  $numpy_src" | sha256sum -c --quiet - || die "numpy: $numpy_src does not match its pin $pin"
fi

# --- base interpreter build (its cross build tree is what the sci link reuses) --------------------------------
base="$work/base"
if [ "$reuse" = 1 ] && [ -f "$base/cross/python-reactor.wasm" ] && [ -f "$base/stage/python.wasm" ]; then
  log "reusing the base build in $base"
else
  log "base build (pyruntime/build.sh)"
  "$repo/pyruntime/build.sh" --work "$base" --out "$work/base-out" $( [ "$install" = 1 ] || echo --no-install )
fi
cross="$base/cross"; native="$base/native"; SYSROOT="$base/wasi-libc/usr"
py_src="$base/src/Python-$PYTHON_VERSION"
[ -f "$cross/Modules/config.c" ] && [ -x "$native/python" ] || die "the base build tree in $base is incomplete"

# The same compilers and flags as the base build's optimized variant (ThinLTO is applied to CPython only; the
# packages are compiled -O3 without LTO to keep their link fast).
shim="$base/shim"; export PATH="$shim:$PATH"
FEAT="-mbulk-memory -mnontrapping-fptoint"
MAP="-ffile-prefix-map=$work=/wasmbox-sci -fdebug-prefix-map=$work=/wasmbox-sci"
WCC="clang-19 --target=wasm32-wasi --sysroot=$SYSROOT"
LIBCXX_INC=/usr/lib/llvm-19/include/wasm32-wasi/c++/v1
LIBCXX_LIB=/usr/lib/llvm-19/lib/wasm32-wasi
# libc++ for wasm32 is built without exceptions: C++ sources are compiled with -fno-exceptions (a throw is then a
# compile error, never a silent abort) and without RTTI where they allow it.
WCXX="clang++-19 --target=wasm32-wasi --sysroot=$SYSROOT -nostdinc++ -isystem $LIBCXX_INC -fno-exceptions"
EXT_CFLAGS="-O3 $FEAT $MAP -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS -D_WASI_EMULATED_GETPID -D_WASI_EMULATED_MMAN"
export AR=llvm-ar-19 RANLIB=llvm-ranlib-19
# Headers of the wasm interpreter: the source Include/ and the cross build's pyconfig.h.
pyinc="$work/pyinc"; rm -rf "$pyinc"; mkdir -p "$pyinc"
cp -a "$py_src/Include/." "$pyinc/"; cp -p "$cross/pyconfig.h" "$pyinc/" # -p: the same mtimes on every run, so SCI_INCREMENTAL rebuilds only what changed

pkgroot="$work/pkg"; rm -rf "$pkgroot"; mkdir -p "$pkgroot"

# --- package: selftest --------------------------------------------------------------------------------------
build_selftest() {
  local d="$pkgroot/selftest" s="$here/selftest"
  mkdir -p "$d/obj" "$d/lib" "$d/py"
  $WCC $EXT_CFLAGS -I"$pyinc" -c "$s/native.c" -o "$d/obj/native.o"
  $WCXX $EXT_CFLAGS -fno-rtti -c "$s/median.cpp" -o "$d/obj/median.o"
  $WCC $EXT_CFLAGS -I"$pyinc" -c "$s/lalg.c" -o "$d/obj/lalg.o"
  llvm-ar-19 rcsD "$d/lib/libscitest.a" "$d/obj/native.o" "$d/obj/median.o" "$d/obj/lalg.o"
  printf 'wasmbox_scitest._core._native PyInit__native\nwasmbox_scitest._linalg._lalg PyInit__lalg\n' > "$d/modules.txt"
  cp -a "$s/py/." "$d/py/"
  echo "selftest" > "$d/VERSION"
}

# --- package: pandas ---------------------------------------------------------------------------------------
# pandas' C and Cython sources through meson (meson-env.sh). Until numpy itself builds here, numpy's C headers
# come from Debian's python3-numpy-dev of the same numpy version, with _numpyconfig.h regenerated for wasm32.
build_pandas() {
  local d="$pkgroot/pandas" s="$work/pandas-src" b="$work/pandas-build"
  . "$here/meson-env.sh"
  tools_setup
  local npd="$work/numpy-dev"; rm -rf "$npd"; mkdir -p "$npd"; dpkg -x "$dl/$NUMPYDEV_DEB" "$npd"
  local npinc; npinc=$(find "$npd" -type d -path '*numpy/_core/include' | head -1)
  "$here/numpyconfig.sh" $WCC > "$npinc/numpy/_numpyconfig.h"
  # numpy 2.2's npy_cpu.h knows wasm only as __EMSCRIPTEN__; wasm32-wasi defines __wasm__.
  sed -i 's/^#elif defined(__EMSCRIPTEN__)$/#elif defined(__EMSCRIPTEN__) || defined(__wasm__)/' "$npinc/numpy/npy_cpu.h"
  grep -q '__wasm__' "$npinc/numpy/npy_cpu.h" || die "could not patch npy_cpu.h"
  touch -d "@$SOURCE_DATE_EPOCH" "$npinc/numpy/npy_cpu.h" "$npinc/numpy/_numpyconfig.h"
  mkdir -p "$tools/stubs/numpy"
  # numpy's own Cython declarations (Cython's bundled numpy .pxd is the numpy 1.x one)
  local npb="$work/numpy-bin"; rm -rf "$npb"; mkdir -p "$npb"; dpkg -x "$dl/$NUMPYBIN_DEB" "$npb"
  (cd "$npb/usr/lib/python3/dist-packages" && find numpy -name '*.pxd' | while read -r f; do
     mkdir -p "$tools/stubs/$(dirname "$f")"; cp "$f" "$tools/stubs/$f"; done)
  printf '# build-time stand-in: only get_include() is used, by meson.build\ndef get_include():\n    return %s\n' \
    "'$npinc'" > "$tools/stubs/numpy/__init__.py"
  printf '# build-time stand-in for the versioneer that Debian removed; never called when _version_meson exists\n' \
    > "$tools/stubs/versioneer.py"
  # SCI_INCREMENTAL=1 keeps an existing meson build tree (development only: ninja rebuilds what changed)
  if [ "${SCI_INCREMENTAL:-0}" = 1 ] && [ -f "$b/build.ninja" ]; then
    log "pandas: reusing the meson build tree $b"
  else
  rm -rf "$s" "$b"; mkdir -p "$s"; tar -C "$s" --strip-components=1 -xf "$dl/$PANDAS_ORIG"
  # Debian's repack drops versioneer; pandas' meson.build then takes the version from _version_meson.py.
  printf '__version__="%s"\n__git_version__=""\n' "$PANDAS_VERSION" > "$s/_version_meson.py"
  # pandas vendors three functions of numpy's datetime code under numpy's own names: one static link has both,
  # so pandas' copies are renamed in every pandas compile unit (C and Cython-generated alike).
  meson_cross_file "$work/cross-wasm32-pandas.ini" -Dis_leapyear=pandas_is_leapyear \
    -Dadd_minutes_to_datetimestruct=pandas_add_minutes_to_datetimestruct -Dget_datetimestruct_days=pandas_get_datetimestruct_days; meson_native_file "$work/native.ini"
  (cd "$s" && meson_env "$tbin/meson" setup --cross-file "$work/cross-wasm32-pandas.ini" --native-file "$work/native.ini" -Dbuildtype=release -Db_ndebug=if-release \
     "$b" >"$work/pandas-setup.log" 2>&1) || { tail -30 "$work/pandas-setup.log" >&2; die "pandas: meson setup failed"; }
  fi
  # khash_python.h defines its allocator functions non-static in a header that several modules include: harmless
  # in separate shared libraries, duplicate symbols in one static link. Make them static (idempotent).
  sed -i -E 's/^(void \*|void )(traced_(malloc|calloc|realloc|free))\(/static \1\2(/' \
    "$s/pandas/_libs/include/pandas/vendored/klib/khash_python.h"
  [ "$(grep -cE '^static void \*?traced_' "$s/pandas/_libs/include/pandas/vendored/klib/khash_python.h")" = 4 ] \
    || die "pandas: could not make khash_python.h's allocator functions static"
  (cd "$b" && meson_env ninja -j2 >"$work/pandas-ninja.log" 2>&1) || { grep -B2 -A12 -m3 'error' "$work/pandas-ninja.log" >&2; die "pandas: build failed"; }
  mkdir -p "$d/py"
  local n; n=$(collect_modules "$b" "$d"); log "pandas: $n extension modules"
  (cd "$s" && find pandas -name '*.py' -not -path '*/tests/*' | while read -r f; do mkdir -p "$d/py/$(dirname "$f")"; cp "$f" "$d/py/$f"; done)
  cp "$s/_version_meson.py" "$d/py/pandas/"
  # top-level imports of modules the sandbox lacks (ctypes, mmap) made lazy or optional
  "$native/python" -E -s "$here/pandas-nofeatures.py" "$d/py" || die "pandas: the import rewrites no longer apply"
  echo "$PANDAS_VERSION (numpy headers: python3-numpy-dev $NUMPYDEV_DEB_VERSION)" > "$d/VERSION"
}

# --- package: pydeps (pandas' pure-Python dependencies: dateutil, six, pytz) ------------------------------
build_pydeps() {
  local d="$pkgroot/pydeps" x="$work/pydeps-x"
  rm -rf "$x"; mkdir -p "$x" "$d/py"
  for deb in "$DATEUTIL_DEB" "$SIX_DEB" "$PYTZ_DEB"; do dpkg -x "$dl/$deb" "$x"; done
  local sp="$x/usr/lib/python3/dist-packages"
  cp -a "$sp/dateutil" "$sp/six.py" "$d/py/"
  # Debian's pytz reads /usr/share/zoneinfo (the sandbox's tzdata); its nested pytz/pytz copy is not needed
  mkdir -p "$d/py/pytz"; cp -a "$sp"/pytz/*.py "$d/py/pytz/"
  find "$d/py" -name '__pycache__' -prune -exec rm -rf {} +
  : > "$d/modules.txt"; mkdir -p "$d/lib"
  echo "dateutil $DATEUTIL_DEB_VERSION, six $SIX_DEB_VERSION, pytz $PYTZ_DEB_VERSION" > "$d/VERSION"
}

# --- package: numpy -----------------------------------------------------------------------------------------
# numpy's C and C++ sources through its own meson fork (vendored-meson: numpy's meson.build needs its `features`
# module), cross-compiled like pandas: no BLAS (numpy's lapack-lite), no SIMD dispatch, no threads, none of the
# x86-only submodules (the source tree leaves them out).
build_numpy() {
  local d="$pkgroot/numpy" s="$work/numpy-src" b="$work/numpy-build"
  . "$here/meson-env.sh"
  tools_setup
  if [ "${SCI_INCREMENTAL:-0}" = 1 ] && [ -f "$b/build.ninja" ]; then
    log "numpy: reusing the meson build tree $b"
  else
  rm -rf "$s" "$b"; mkdir -p "$s"; tar -C "$s" --strip-components=1 -xf "$numpy_src"
  # numpy 2.2's npy_cpu.h knows wasm only as __EMSCRIPTEN__; wasm32-wasi defines __wasm__.
  sed -i 's/^#elif defined(__EMSCRIPTEN__)$/#elif defined(__EMSCRIPTEN__) || defined(__wasm__)/' "$s/numpy/_core/include/numpy/npy_cpu.h"
  grep -q '__wasm__' "$s/numpy/_core/include/numpy/npy_cpu.h" || die "numpy: could not patch npy_cpu.h"
  # One static link holds every module, so names that separate shared libraries keep apart collide here, and
  # wasm-ld then binds callers to the other definition (a signature mismatch traps at the first call).
  # numpy.random.mtrand compiles its own copy of the distributions with RAND_INT_TYPE=long (32-bit on wasm32)
  # while libnpyrandom's copy uses int64: mtrand's copy gets its own names, as its own .so has natively.
  local rn; rn=$(grep -oE '^[a-zA-Z_].*[^a-zA-Z0-9_](random_[a-z0-9_]+)\(' "$s/numpy/random/src/distributions/distributions.c" \
    | grep -v '^static' | grep -oE 'random_[a-z0-9_]+\($' | tr -d '(' | sort -u | sed "s/.*/'-D&=mtrand_&'/" | paste -sd, -)
  [ -n "$rn" ] || die "numpy: found no distribution functions to rename for mtrand"
  sed -i "s/\['-DNP_RANDOM_LEGACY=1'\]/['-DNP_RANDOM_LEGACY=1', $rn]/" "$s/numpy/random/meson.build"
  grep -q "mtrand_random_poisson" "$s/numpy/random/meson.build" || die "numpy: could not patch random/meson.build"
  # pandas vendors get_datetime_metadata_from_dtype with another signature (it returns the struct; numpy's
  # returns a pointer) and reaches its own through a capsule macro, so numpy's copy is the one renamed.
  meson_cross_file "$work/cross-wasm32.ini" -Dget_datetime_metadata_from_dtype=npy_get_datetime_metadata_from_dtype
  meson_native_file "$work/native.ini"
  (cd "$s" && meson_env "$native/python" -s vendored-meson/meson/meson.py setup \
     --cross-file "$work/cross-wasm32.ini" --native-file "$work/native.ini" -Dbuildtype=release -Db_ndebug=if-release \
     -Dallow-noblas=true -Dblas=none -Dlapack=none -Ddisable-svml=true -Ddisable-intel-sort=true \
     -Ddisable-highway=true -Ddisable-threading=true -Ddisable-optimization=true -Dcpu-baseline=none -Dcpu-dispatch=none \
     "$b" >"$work/numpy-setup.log" 2>&1) || { tail -40 "$work/numpy-setup.log" >&2; die "numpy: meson setup failed"; }
  fi
  (cd "$b" && meson_env ninja -j2 >"$work/numpy-ninja.log" 2>&1) || { grep -B2 -A12 -m3 'error' "$work/numpy-ninja.log" >&2; die "numpy: build failed"; }
  mkdir -p "$d/py"
  local n; n=$(collect_modules "$b" "$d"); log "numpy: $n extension modules"
  (cd "$s" && find numpy -name '*.py' -not -path '*/tests/*' | while read -r f; do mkdir -p "$d/py/$(dirname "$f")"; cp "$f" "$d/py/$f"; done)
  # what meson generates into the package (version, build configuration)
  (cd "$b" && find numpy -name '*.py' | while read -r f; do mkdir -p "$d/py/$(dirname "$f")"; cp "$f" "$d/py/$f"; done)
  echo "$NUMPY_VERSION ($NUMPY_SRC)" > "$d/VERSION"
}

steps=$pkgs
[[ " $pkgs " == *" pandas "* ]] && steps="$steps pydeps"
for p in $steps; do log "package $p"; "build_$p"; done

# --- link: inittab entries for every dotted module, then the reactor link -------------------------------------
log "link"
cfg="$work/sci-config.c"
mods=$(cat "$pkgroot"/*/modules.txt)
dups=$(echo "$mods" | awk '{print $2}' | sort | uniq -d)
[ -z "$dups" ] || die "two modules share an init symbol (rename one): $dups"
# Each entry calls a wrapper that sets the package context around the module's PyInit, as CPython's loader of
# shared extension modules does: a single-phase module (numpy's C modules are) then gets its full dotted name
# (__name__, and the __module__ of its functions and types) instead of the leaf name in its PyModuleDef.
# Multi-phase modules (Cython's) take the name from the spec anyway.
{
  sed '/^struct _inittab _PyImport_Inittab/,$d' "$cross/Modules/config.c"
  echo "/* sci packages, linked in by pyruntime/sci/build.sh */"
  echo "extern const char *_PyImport_SwapPackageContext(const char *newcontext);"
  i=0
  echo "$mods" | while read -r name sym; do
    i=$((i + 1))
    echo "extern PyObject *$sym(void);"
    echo "static PyObject *sci_init_$i(void) {"
    echo "    const char *old = _PyImport_SwapPackageContext(\"$name\");"
    echo "    PyObject *m = $sym();"
    echo "    _PyImport_SwapPackageContext(old);"
    echo "    return m;"
    echo "}"
  done
  sed -n '/^struct _inittab _PyImport_Inittab/,/\/\* Sentinel \*\//p' "$cross/Modules/config.c" | sed '$d'
  i=0
  echo "$mods" | while read -r name sym; do i=$((i + 1)); echo "    {\"$name\", sci_init_$i},"; done
  sed -n '/\/\* Sentinel \*\//,$p' "$cross/Modules/config.c"
} > "$cfg"
grep -q '"wasmbox_scitest\|"numpy' "$cfg" || die "no package module reached the inittab"
$WCC $EXT_CFLAGS -c "$here/c/cxa_abort.c" -o "$work/cxa_abort.o"
libs="$(ls "$pkgroot"/*/lib/*.a | tr '\n' ' ') $work/cxa_abort.o"
# -lc-printscan-long-double: numpy formats and parses long double (wasi-libc leaves it out by default, and the
# first use aborts the guest without it).
cat > "$cross/sci.mk" <<'MK'
include Makefile
sci-config.o: $(SCI_CONFIG_C)
	$(CC) -c $(PY_BUILTIN_MODULE_CFLAGS) -o $@ $<
sci-reactor.o: $(WASMBOX_REACTOR_C)
	$(CC) -c $(PY_CORE_CFLAGS) -o $@ $<
python-sci.wasm: sci-reactor.o sci-config.o
	$(LINKCC) $(PY_CORE_LDFLAGS) -mexec-model=reactor -o $@ sci-reactor.o sci-config.o $(filter-out Modules/config.o,$(LINK_PYTHON_OBJS)) $(SCI_LIBS) -L$(LIBCXX_LIB) -lc++ -lc++abi -lc-printscan-long-double $(LIBS) $(MODLIBS) $(SYSLIBS) -Wl,--export=__stack_pointer
MK
rm -f "$cross/sci-config.o" "$cross/sci-reactor.o" "$cross/python-sci.wasm"
(cd "$cross" && make -s -f sci.mk SCI_CONFIG_C="$cfg" WASMBOX_REACTOR_C="$repo/pyruntime/c/reactor.c" \
   SCI_LIBS="$libs" LIBCXX_LIB="$LIBCXX_LIB" python-sci.wasm >/dev/null 2>"$work/link.log") \
  || { tail -40 "$work/link.log" >&2; die "link failed"; }
# A signature mismatch means two modules define one name differently and some caller got the wrong one: the
# call traps at run time. Never ship that.
! grep -A2 'function signature mismatch' "$work/link.log" >&2 || die "link bound a caller to a definition with another signature (rename one; see above)"

# --- instrument, strip, check imports (as the base build) -------------------------------------------------------
log "instrument"
stage="$work/stage"; rm -rf "$stage"; mkdir -p "$stage"
llvm-strip-19 --strip-all -o "$stage/python-uninstrumented.wasm" "$cross/python-sci.wasm"
(cd "$repo" && go run ./pyruntime/cmd/wasm-instrument -stats-json "$stage/instrument.json" \
   "$stage/python-uninstrumented.wasm" "$stage/python.wasm")
bad=$(cd "$repo" && go run ./pyruntime/cmd/wasm-instrument -list-imports "$stage/python.wasm" | grep -v -E '^(wasi_snapshot_preview1|wasmbox_v1)\.' || true)
[ -z "$bad" ] || die "unexpected imports:"$'\n'"$bad"

# --- stdlib: the base build's pruned, precompiled stdlib plus every package's Python files ----------------------
log "stdlib"
lib="$stage/lib"; cp -a "$base/stage/lib" "$lib"
for d in "$pkgroot"/*/py; do
  cp -a "$d/." "$lib/"
  for top in "$d"/*; do
    n=$(basename "$top")
    PYTHONHASHSEED=0 "$native/python" -E -s -m compileall -q -j1 --invalidation-mode unchecked-hash \
      -d "/usr/local/lib/python3.13/$n" "$lib/$n" >/dev/null || die "compileall failed in $n"
  done
done
"$native/python" -E -s "$repo/pyruntime/tools/mkzip.py" "$lib" "$stage/stdlib.zip"

# --- ship -------------------------------------------------------------------------------------------------------
cp "$stage/python.wasm" "$stage/stdlib.zip" "$out/"
cp "$base/stage/tzdata.zip" "$out/"
gzip -9 -n -c "$stage/python.wasm" > "$out/python.wasm.gz"
t1=$(date +%s)
{
  echo "sci interpreter (pyruntime/sci/build.sh)"
  echo "packages: $with"
  for p in $steps; do echo "  $p $(cat "$pkgroot/$p/VERSION")"; done
  echo "builtin modules added: $(echo "$mods" | awk '{print $1}' | tr '\n' ' ')"
  echo "python.wasm: $(stat -c %s "$out/python.wasm") bytes (gzip -9: $(stat -c %s "$out/python.wasm.gz"))"
  echo "stdlib.zip: $(stat -c %s "$out/stdlib.zip") bytes"
  echo "instrumentation: $(cat "$stage/instrument.json")"
  echo "build seconds (this run): $((t1 - t0))"
} > "$out/BUILDINFO"
(cd "$out" && sha256sum python.wasm python.wasm.gz stdlib.zip tzdata.zip BUILDINFO > SHA256SUMS)
log "done in $((t1 - t0)) s -> $out"
