#!/usr/bin/env bash
# train.sh — regenerate pyruntime/pgo/cpython.proftext.xz, the profile the interpreter build optimises with.
#
#   pyruntime/pgo/train.sh [--work DIR]
#
# WebAssembly code cannot be profiled where the build runs: Debian's wasm32 compiler-rt has only the builtins,
# no profile runtime. Clang's front-end profiles do not depend on the target, though: a function's counters are
# named by the function (a static one by its file's base name) and checked against a hash of its source-level
# control flow. So the profile is gathered on a native build of the same CPython source with the same patches,
# configured like the wasm one where it changes control flow (no computed gotos: WebAssembly has none), running
# CPython's own training set (`-m test --pgo`, what CPython's --enable-optimizations uses). When build.sh
# compiles for wasm32 with it, a function whose source differs between the two targets (an #ifdef on the
# platform) has a different hash and is left unprofiled: it is optimised as without a profile, never wrongly.
#
# The training run is not deterministic (timings, hash seeds, the order of parallel tests), so its result is a
# checked-in input of the build, like the source tarballs: the build stays reproducible, and this script is how
# the input is remade (after a CPython version or patch change). It writes the text format, which does not
# depend on the LLVM version, with functions that never ran left out (--sparse).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/versions.env"
work=${XDG_CACHE_HOME:-$HOME/.cache}/wasmbox-build/pgo
[ "${1:-}" = --work ] && work=$2
command -v clang-19 >/dev/null && command -v llvm-profdata-19 >/dev/null \
  || { echo "train.sh: needs clang-19 and llvm-19 (pyruntime/build.sh installs them)" >&2; exit 1; }
[ -e /usr/lib/llvm-19/lib/clang/19/lib/x86_64-pc-linux-gnu/libclang_rt.profile.a ] || {
  # the native profile runtime, of the same LLVM as the toolchain
  v=$(echo "$TOOLCHAIN_PACKAGES" | sed -n 's/.*[ "]clang-19=\([^ ]*\).*/\1/p; s/^clang-19=\([^ ]*\).*/\1/p' | head -1)
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "libclang-rt-19-dev=$v" >/dev/null
}
dl=${XDG_CACHE_HOME:-$HOME/.cache}/wasmbox-build/dl
"$here/fetch.sh" "$dl" >/dev/null
(cd "$dl" && sha256sum -c --quiet --ignore-missing "$here/inputs.sha256")
rm -rf "$work"; mkdir -p "$work/src" "$work/native" "$work/raw"
tar -C "$work/src" -xf "$dl/python3.13_$PYTHON_VERSION.orig.tar.xz"
py_src="$work/src/Python-$PYTHON_VERSION"
(cd "$py_src" && patch -p1 --quiet --no-backup-if-mismatch < "$here/patches/cpython.patch")
echo "train.sh: instrumented native build" >&2
(cd "$work/native" && CC=clang-19 CFLAGS="-O2 -fprofile-instr-generate" LDFLAGS="-fprofile-instr-generate" \
  "$py_src/configure" -q --without-computed-gotos --with-pymalloc --disable-test-modules >/dev/null \
  && make -s -j"$(nproc)" >/dev/null 2>&1)
echo "train.sh: training (python -m test --pgo)" >&2
(cd "$work/native" && LLVM_PROFILE_FILE="$work/raw/%m-%p.profraw" ./python -m test --pgo -j"$(nproc)" >"$work/train.log" 2>&1) \
  || { tail -20 "$work/train.log" >&2; exit 1; }
llvm-profdata-19 merge --sparse -o "$work/cpython.profdata" "$work"/raw/*.profraw
llvm-profdata-19 merge --sparse --text -o "$work/cpython.proftext" "$work/cpython.profdata"
xz -9 -T1 -c "$work/cpython.proftext" > "$here/pgo/cpython.proftext.xz"
echo "train.sh: wrote $here/pgo/cpython.proftext.xz ($(llvm-profdata-19 show "$work/cpython.profdata" | grep 'Total functions'))" >&2
