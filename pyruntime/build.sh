#!/usr/bin/env bash
# build.sh — build the wasmbox interpreter (CPython 3.13 for WASI preview 1, reactor model, with the _wasmbox
# host-call module and the hard-deadline loop instrumentation) from Debian's archive only.
#
#   pyruntime/build.sh [--out DIR] [--work DIR] [--variant optimized|plain] [--no-install] [--reship|--reinstrument]
#
# --out      where the artifacts go (default: assets/ of this repository)
# --work     build directory (default: $XDG_CACHE_HOME/wasmbox-build/<variant>); downloads are cached beside it
# --variant  optimized (shipped: pymalloc, bulk-memory, nontrapping-fptoint, ThinLTO) or plain (the first build,
#            -O3 without those, kept only to measure what the flags buy)
# --reship   regenerate BUILDINFO and SHA256SUMS from the last build's stage
# --reinstrument  re-run only the rewriter (cmd/wasm-instrument) over DIR/uninstrumented/python.wasm.gz and reship,
#            keeping stdlib.zip and tzdata.zip: after a change of the rewriter, what a full build would produce
#
# Artifacts: python.wasm.gz (instrumented), uninstrumented/python.wasm.gz (for bench/ only), stdlib.zip,
# tzdata.zip, BUILDINFO, SHA256SUMS. Reproducible: fixed SOURCE_DATE_EPOCH, -ffile-prefix-map, sorted zips with
# fixed timestamps; `make verify-interpreter` rebuilds in a fresh folder and compares every checksum.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/versions.env"
export SOURCE_DATE_EPOCH LC_ALL=C TZ=UTC

out="$repo/assets"; variant=optimized; install=1; work=""; reship=0; reinstrument=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2;;
    --work) work=$2; shift 2;;
    --variant) variant=$2; shift 2;;
    --no-install) install=0; shift;;
    --reship) reship=1; shift;;
    --reinstrument) reinstrument=1; shift;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2;;
  esac
done
case "$variant" in optimized|plain) ;; *) echo "build.sh: unknown variant $variant" >&2; exit 2;; esac
# Profile-guided optimisation of CPython (optimized only) with pyruntime/pgo/cpython.proftext.xz, a checked-in
# input that pyruntime/pgo/train.sh makes on a native build (its header says why there and how).
pgo_profile="$(cd "$(dirname "$0")" && pwd)/pgo/cpython.proftext.xz"
PGO_INFO=none
[ "$variant" = optimized ] && PGO_INFO="pyruntime/pgo/cpython.proftext.xz sha256:$(sha256sum < "$pgo_profile" | cut -c1-64)"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/wasmbox-build
work=${work:-$cache/$variant}
mkdir -p "$work" "$out"
work=$(cd "$work" && pwd); out=$(cd "$out" && pwd)
dl="$cache/dl"
log() { echo "build.sh: $*" >&2; }
t0=$(date +%s)

case "$variant" in
  optimized) FEAT="-mbulk-memory -mnontrapping-fptoint"; OPTC="-O3 $FEAT"; LTO_CONF="--with-lto=thin"; PYMALLOC="--with-pymalloc";;
  plain)     FEAT=""; OPTC="-O3"; LTO_CONF=""; PYMALLOC="--without-pymalloc";;
esac
native="$work/native"; stage="$work/stage"
# The build's Python runs buildinfo.py; --reinstrument, which builds nothing, may use the machine's python3.
hostpy() { if [ -x "$native/python" ]; then "$native/python" "$@"; else python3 "$@"; fi; }
# instrument: stage/python-uninstrumented.wasm -> stage/python.wasm (+ instrument.json), imports checked.
instrument() {
  (cd "$repo" && go run ./pyruntime/cmd/wasm-instrument -stats-json "$stage/instrument.json" \
     "$stage/python-uninstrumented.wasm" "$stage/python.wasm")
  local bad
  bad=$(cd "$repo" && go run ./pyruntime/cmd/wasm-instrument -list-imports "$stage/python.wasm" | grep -v -E '^(wasi_snapshot_preview1|wasmbox_v1)\.' || true)
  [ -z "$bad" ] || { echo "build.sh: unexpected imports:"$'\n'"$bad" >&2; exit 1; }
}
ship() {
  gzip -9 -n -c "$stage/python.wasm" > "$out/python.wasm.gz"
  mkdir -p "$out/uninstrumented"
  gzip -9 -n -c "$stage/python-uninstrumented.wasm" > "$out/uninstrumented/python.wasm.gz"
  cp "$stage/stdlib.zip" "$stage/tzdata.zip" "$out/"
  hostpy -E -s "$here/tools/buildinfo.py" --variant "$variant" --versions "$here/versions.env" \
    --stage "$stage" --out "$out" --instrument "$stage/instrument.json" --cflags="$OPTC" \
    --configure="$PYMALLOC $LTO_CONF" --pgo="$PGO_INFO" --measured "$here/MEASURED" > "$out/BUILDINFO"
  (cd "$out" && sha256sum python.wasm.gz stdlib.zip tzdata.zip BUILDINFO uninstrumented/python.wasm.gz > SHA256SUMS)
}

# --reship: regenerate BUILDINFO (e.g. after pyruntime/MEASURED changed) and SHA256SUMS from the last build's
# stage, without rebuilding.
if [ "$reship" = 1 ]; then
  [ -f "$stage/python.wasm" ] || { echo "build.sh: --reship needs a previous build in $work" >&2; exit 1; }
  ship; log "reshipped -> $out"; exit 0
fi
if [ "$reinstrument" = 1 ]; then
  [ -s "$out/uninstrumented/python.wasm.gz" ] || { echo "build.sh: --reinstrument needs $out/uninstrumented/python.wasm.gz" >&2; exit 1; }
  rm -rf "$stage"; mkdir -p "$stage"
  gzip -d -c "$out/uninstrumented/python.wasm.gz" > "$stage/python-uninstrumented.wasm"
  cp "$out/stdlib.zip" "$out/tzdata.zip" "$stage/"
  log "instrument (again)"
  instrument
  ship; log "reinstrumented -> $out"; exit 0
fi

# --- toolchain (bookworm) -----------------------------------------------------------------------------------
if ! command -v clang-19 >/dev/null || ! command -v wasm-ld-19 >/dev/null || ! command -v tclsh8.6 >/dev/null \
   || ! [ -d /usr/lib/llvm-19/lib/clang/19/lib/wasi ] || ! command -v zip >/dev/null || ! dpkg -s libffi-dev >/dev/null 2>&1; then
  [ "$install" = 1 ] || { echo "build.sh: toolchain missing and --no-install given" >&2; exit 1; }
  log "installing toolchain: $TOOLCHAIN_PACKAGES"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $TOOLCHAIN_PACKAGES >/dev/null
fi

# --- inputs ---------------------------------------------------------------------------------------------------
"$here/fetch.sh" "$dl"
(cd "$dl" && sha256sum -c --quiet "$here/inputs.sha256") || { echo "build.sh: input checksum mismatch" >&2; exit 1; }

# Every path below is under $work; -ffile-prefix-map keeps it out of the binary so two folders build the same bytes.
src="$work/src"; rm -rf "$src"; mkdir -p "$src"
tar -C "$src" -xf "$dl/python3.13_3.13.5.orig.tar.xz"
tar -C "$src" -xf "$dl/sqlite3_3.46.1.orig.tar.xz"
tar -C "$src" -xf "$dl/zlib_1.3.dfsg+really1.3.1.orig.tar.gz"
tar -C "$src" -xf "$dl/bzip2_1.0.8.orig.tar.gz"
tar -C "$src" -xf "$dl/xz-utils_5.8.1.orig.tar.xz"
py_src="$src/Python-$PYTHON_VERSION"
# Our changes to CPython (each explained in the patch): parser depth, math.fma's sign of zero, time.tzset.
(cd "$py_src" && patch -p1 --quiet --no-backup-if-mismatch < "$here/patches/cpython.patch")
sqlite_src=$(ls -d "$src"/sqlite*/ | head -1); zlib_src=$(ls -d "$src"/zlib*/ | head -1)
bzip2_src=$(ls -d "$src"/bzip2*/ | head -1); xz_src=$(ls -d "$src"/xz*/ | head -1)

sysroot="$work/wasi-libc"
rm -rf "$sysroot"; mkdir -p "$sysroot"; dpkg -x "$dl"/wasi-libc_*_all.deb "$sysroot"
SYSROOT="$sysroot/usr"

# clang-19 silently runs `wasm-opt -O<n>` in place on its output when -O is on the link line and wasm-opt is on
# PATH (configure's test links and some deps do that). A no-op shim first on PATH makes every link hermetic:
# the output is what lld wrote, whether or not binaryen is installed.
shim="$work/shim"; mkdir -p "$shim"
printf '#!/bin/sh\nexit 0\n' > "$shim/wasm-opt"
chmod +x "$shim/wasm-opt"
export PATH="$shim:$PATH"

MAP="-ffile-prefix-map=$work=/wasmbox -fdebug-prefix-map=$work=/wasmbox"
WCC="clang-19 --target=wasm32-wasi --sysroot=$SYSROOT"
export AR=llvm-ar-19 RANLIB=llvm-ranlib-19 READELF=llvm-readelf-19 STRIP=llvm-strip-19
# configure looks llvm-ar up on PATH (bookworm has llvm-ar 14 there, too old for LLVM 19 bitcode): an absolute path wins
export LLVM_AR=/usr/bin/llvm-ar-19 LLVM_PROFDATA=/usr/bin/llvm-profdata-19


# --- C libraries for wasm -------------------------------------------------------------------------------------
deps="$work/deps"; rm -rf "$deps"; mkdir -p "$deps/include" "$deps/lib"
DEPCFLAGS="$OPTC $MAP -D_WASI_EMULATED_GETPID -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS"
log "zlib"
(cd "$zlib_src" && for f in adler32 crc32 deflate infback inffast inflate inftrees trees zutil compress uncompr gzclose gzlib gzread gzwrite; do
   $WCC $DEPCFLAGS -DHAVE_UNISTD_H -DHAVE_STDARG_H -c $f.c -o $f.o; done && llvm-ar-19 rcsD "$deps/lib/libz.a" *.o && cp zlib.h zconf.h "$deps/include/")
log "bzip2"
(cd "$bzip2_src" && for f in blocksort huffman crctable randtable compress decompress bzlib; do
   $WCC $DEPCFLAGS -c $f.c -o $f.o; done && llvm-ar-19 rcsD "$deps/lib/libbz2.a" *.o && cp bzlib.h "$deps/include/")
log "xz"
(cd "$xz_src" && CC="$WCC" CFLAGS="$DEPCFLAGS" ./configure -q --host=wasm32-unknown-wasi --build=x86_64-pc-linux-gnu \
   --disable-shared --enable-static --disable-threads --disable-xz --disable-xzdec --disable-lzmadec \
   --disable-lzmainfo --disable-scripts --disable-doc --disable-nls --disable-sandbox --prefix="$deps" >/dev/null \
   && make -s -j2 -C src/liblzma >/dev/null && make -s -C src/liblzma install >/dev/null)
log "sqlite (amalgamation made natively)"
# The "unix" VFS with in-process locks (c/sqlite_lock.c) instead of WASI's default "unix-dotfile".
(cd "$sqlite_src" && ./configure -q --disable-tcl >/dev/null && make -s sqlite3.c >/dev/null \
   && $WCC $DEPCFLAGS -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_WAL -DSQLITE_MAX_MMAP_SIZE=0 \
        '-DSQLITE_DEFAULT_UNIX_VFS="unix"' -Dfcntl=wasmbox_sqlite_fcntl -c sqlite3.c -o sqlite3.o \
   && $WCC $DEPCFLAGS -c "$here/c/sqlite_lock.c" -o sqlite_lock.o \
   && llvm-ar-19 rcsD "$deps/lib/libsqlite3.a" sqlite3.o sqlite_lock.o && cp sqlite3.h "$deps/include/")

# --- native build Python (same version; runs the build's Python steps) ---------------------------------------
if [ ! -x "$native/python" ]; then
  log "native build python"
  rm -rf "$native"; mkdir -p "$native"
  (cd "$native" && "$py_src/configure" -q --prefix="$native/install" >/dev/null && make -s -j2 >/dev/null 2>&1)
fi

# --- _wasmbox's C paths, checked natively against the json module (pyruntime/c/test) --------------------------
log "native check of _wasmbox"
CC_NATIVE=clang-19 "$here/c/test/run.sh" "$native/python" "$py_src/Include" "$native"

# --- cross build ----------------------------------------------------------------------------------------------
cross="$work/cross"; rm -rf "$cross"; mkdir -p "$cross/Modules"
cp "$here/c/wasmboxmodule.c" "$py_src/Modules/_wasmbox.c"
# wasmbox_tz.c (tzset and libc's time-zone hooks) is a second source of the builtin _wasmbox module, so that every
# link of libpython (CPython's own python.wasm as well as our reactor) has tzset.
cp "$here/c/wasmbox_tz.c" "$py_src/Modules/_wasmbox_tz.c"
printf '*static*\n_wasmbox _wasmbox.c _wasmbox_tz.c\n' > "$cross/Modules/Setup.local"
cat > "$cross/config.site" <<SITE
. "$py_src/Tools/wasm/config.site-wasm32-wasi"
ac_cv_func_clock_nanosleep=no
ac_cv_lib_rt_clock_nanosleep=no
ac_cv_working_tzset=yes
SITE
PGOC=""
if [ "$variant" = optimized ]; then
  xz -dc "$pgo_profile" > "$work/cpython.proftext"
  llvm-profdata-19 merge -o "$work/cpython.profdata" "$work/cpython.proftext"
  # A function whose source differs from the native build's (a platform #ifdef) is left unprofiled; the
  # warnings that say so are counted after the build, not printed per file.
  PGOC="-fprofile-instr-use=$work/cpython.profdata"
fi
log "cross configure ($variant)"
mkdir -p "$work/pkgconfig-empty"
(cd "$cross" && CONFIG_SITE="$cross/config.site" \
  CC="$WCC" CPP="clang-cpp-19 --target=wasm32-wasi --sysroot=$SYSROOT" CXX="clang++-19 --target=wasm32-wasi --sysroot=$SYSROOT" \
  CFLAGS="$OPTC $PGOC $MAP" LDFLAGS="$FEAT $( [ "$variant" = optimized ] && echo '-Wl,--lto-O3')" \
  PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$work/pkgconfig-empty" \
  ZLIB_CFLAGS="-I$deps/include" ZLIB_LIBS="-L$deps/lib -lz" \
  BZIP2_CFLAGS="-I$deps/include" BZIP2_LIBS="-L$deps/lib -lbz2" \
  LIBLZMA_CFLAGS="-I$deps/include" LIBLZMA_LIBS="-L$deps/lib -llzma" \
  LIBSQLITE3_CFLAGS="-I$deps/include" LIBSQLITE3_LIBS="-L$deps/lib -lsqlite3" \
  "$py_src/configure" -q --host=wasm32-unknown-wasi --build=x86_64-pc-linux-gnu \
    --with-build-python="$native/python" --prefix=/usr/local --with-system-libmpdec=no --disable-test-modules \
    --disable-ipv6 $PYMALLOC $LTO_CONF >/dev/null)
# getpath.c gets the source directory as a string (-DVPATH); it only matters when running from a build tree, which
# never happens here, and it would put this build's path into the binary. Pin it.
sed -i "s|-DVPATH='\"\$(VPATH)\"'|-DVPATH='\"/wasmbox/src/Python-$PYTHON_VERSION\"'|" "$cross/Makefile"
grep -q "DVPATH='\"/wasmbox/src" "$cross/Makefile" || { echo "build.sh: could not pin VPATH" >&2; exit 1; }
log "cross make"
(cd "$cross" && make -s -j2 >/dev/null 2>"$work/cross-make.log") || { tail -40 "$work/cross-make.log" >&2; exit 1; }
if [ -n "$PGOC" ]; then
  log "profile: $(awk '/profile data may be out of date: of [0-9]+ functions/ { for (i = 1; i <= NF; i++) { if ($i == "of") t += $(i+1); if ($i == "have" || $i == "has") m += $(i-1) } }
    END { printf "%d functions in files with a mismatch, %d of them left unprofiled", t, m }' "$work/cross-make.log")"
fi
for m in zlib _bz2 _lzma _sqlite3 _wasmbox _decimal _json; do
  grep -q "\b$m\b" "$cross/Modules/config.c" || { echo "build.sh: module $m was not built in" >&2; exit 1; }
done

# --- reactor link -----------------------------------------------------------------------------------------------
log "reactor link"
cat > "$cross/reactor.mk" <<'MK'
include Makefile
wasmbox-reactor.o: $(WASMBOX_REACTOR_C)
	$(CC) -c $(PY_CORE_CFLAGS) -o $@ $<
python-reactor.wasm: wasmbox-reactor.o $(LINK_PYTHON_DEPS)
	$(LINKCC) $(PY_CORE_LDFLAGS) -mexec-model=reactor -o $@ wasmbox-reactor.o $(LINK_PYTHON_OBJS) $(LIBS) $(MODLIBS) $(SYSLIBS) -Wl,--export=__stack_pointer
MK
(cd "$cross" && make -s -f reactor.mk WASMBOX_REACTOR_C="$here/c/reactor.c" \
   python-reactor.wasm >/dev/null)


# --- instrument, strip, check imports -----------------------------------------------------------------------
log "instrument"
rm -rf "$stage"; mkdir -p "$stage"
llvm-strip-19 --strip-all -o "$stage/python-uninstrumented.wasm" "$cross/python-reactor.wasm"
instrument

# --- stdlib -----------------------------------------------------------------------------------------------------
log "stdlib"
lib="$stage/lib"; mkdir -p "$lib"
cp -a "$py_src/Lib/." "$lib/"
cp "$cross"/build/lib.wasi-wasm32-3.13/_sysconfigdata_*.py "$lib/"
sed -i "s|$work|/wasmbox|g" "$lib"/_sysconfigdata_*.py   # build paths out of sysconfig
# _pyrepl stays: pydoc (help()) imports _pyrepl.pager.
(cd "$lib" && rm -rf idlelib tkinter turtledemo turtle.py ensurepip pydoc_data venv curses test \
   lib2to3 __phello__ __hello__.py site-packages config-3.13-* _ios_support.py _android_support.py \
   msilib _osx_support.py ctypes/macholib)
find "$lib" -name __pycache__ -prune -exec rm -rf {} +
find "$lib" -type d \( -name test -o -name tests \) -prune -exec rm -rf {} +
mkdir -p "$lib/lib-dynload"
# PYTHONHASHSEED=0: frozenset constants are marshalled in hash order, which is otherwise random per process.
PYTHONHASHSEED=0 "$native/python" -E -s -m compileall -q -j1 --invalidation-mode unchecked-hash -d /usr/local/lib/python3.13 \
   -x '/(lib2to3|test)/' "$lib" >/dev/null || true
"$native/python" -E -s "$here/tools/mkzip.py" "$lib" "$stage/stdlib.zip"

log "tzdata"
tz="$work/tzdata"; rm -rf "$tz"; mkdir -p "$tz"; dpkg -x "$dl/tzdata.deb" "$tz"; dpkg -x "$dl/tzdata-legacy.deb" "$tz"
zi="$tz/usr/share/zoneinfo"
rm -rf "$zi/right" "$zi/posix" "$zi/posixrules"
find "$zi" -type l | while read -r l; do t=$(readlink -f "$l"); rm "$l"; cp "$t" "$l"; done
"$native/python" -E -s "$here/tools/mkzip.py" "$zi" "$stage/tzdata.zip"

# --- import every shipped module once (the skip list, with reasons, is in pyruntime/cmd/importcheck) -------------
log "import check"
(cd "$repo" && go run ./pyruntime/cmd/importcheck -dir "$stage")

# --- ship -------------------------------------------------------------------------------------------------------
ship
t1=$(date +%s)
log "done in $((t1 - t0)) s -> $out"
