# meson-env.sh — sourced by the package steps of build.sh: sets up meson 1.7.0 and Cython 3.0.11 (pure Python,
# run by the base build's native Python 3.13) to cross-compile a meson-python project (numpy, pandas) for
# wasm32-wasi, with every extension module turned into a static archive instead of a shared library.
#
# Needs from build.sh: work, dl, native, SYSROOT, pyinc, WCC, WCXX, EXT_CFLAGS, LIBCXX_INC, here.
# Defines: tools_setup, meson_cross_file DIR, collect_modules BUILDDIR PKGDIR.

tools="$work/tools"; tbin="$work/tools/bin"; tpy="$tools/usr/lib/python3/dist-packages"

tools_setup() {
  rm -rf "$tools"; mkdir -p "$tools" "$tbin"
  dpkg -x "$dl/$MESON_DEB" "$tools"; dpkg -x "$dl/$CYTHON_DEB" "$tools"; dpkg -x "$dl/$MESONPY_DEB" "$tools"
  # Cython's compiled modules are for Debian's own python3.13 (trixie's libc); its .py files are the same code.
  find "$tools" -name '*.so' -delete
  # The build Python: the native CPython 3.13.5 with the tools on its path. _PYTHON_SYSCONFIGDATA_NAME makes its
  # sysconfig describe the wasm interpreter (cross build's sysconfigdata, headers at $pyinc), so meson's python
  # module finds wasm headers, never the native pyconfig.h.
  local sysc="$tools/sysconfig"; mkdir -p "$sysc"
  local sd; sd=$(ls "$work"/base/cross/build/lib.wasi-wasm32-3.13/_sysconfigdata_*.py)
  sed -e "s|'INCLUDEPY': '[^']*'|'INCLUDEPY': '$pyinc'|" -e "s|'CONFINCLUDEPY': '[^']*'|'CONFINCLUDEPY': '$pyinc'|" \
    "$sd" > "$sysc/$(basename "$sd")"
  cat > "$tbin/python3" <<SH
#!/bin/sh
PYTHONPATH="$sysc:$tools/stubs:$tpy" _PYTHON_SYSCONFIGDATA_NAME=$(basename "$sd" .py) exec "$native/python" -s "\$@"
SH
  # Plain native Python for meson itself and Cython (no sysconfig redirection).
  cat > "$tbin/hostpython" <<SH
#!/bin/sh
PYTHONPATH="$tools/stubs:$tpy" exec "$native/python" -s "\$@"
SH
  printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$tbin/hostpython" "$tpy/cython.py" > "$tbin/cython"
  # meson records its own path for the commands in build.ninja: a script whose interpreter is the native Python
  # (PYTHONPATH=$tpy must be set for meson and ninja, see meson_env).
  { echo "#!$native/python -s"; tail -n +2 "$tools/usr/bin/meson"; } > "$tbin/meson"
  # The compilers. C++ gets -fexceptions: without wasm exception handling its try blocks compile to nothing and a
  # throw aborts the guest (c/cxa_abort.c); pandas' Cython `except +` wrappers need it to compile at all.
  # A link with -shared (a Python extension module) becomes a static archive of its objects plus
  # a list of the archives it links (<out>.libs), for the one final link into python.wasm.
  for lang in cc cxx; do
    local real; [ "$lang" = cc ] && real="$WCC" || real="$WCXX"
    cat > "$tbin/w$lang" <<SH
#!/bin/bash
for a in "\$@"; do [ "\$a" = -shared ] && exec "$tbin/archive-link" "\$@"; done
exec $real $( [ "$lang" = cxx ] && echo -fexceptions ) "\$@"
SH
  done
  cat > "$tbin/archive-link" <<'SH'
#!/bin/bash
set -e
out=""; objs=(); libs=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$2; shift 2; continue;;
    *.o|*.obj) objs+=("$(realpath "$1")");;
    *.a) libs+=("$(realpath "$1")");;
  esac
  shift
done
[ -n "$out" ] || { echo "archive-link: no -o" >&2; exit 1; }
rm -f "$out" "$out.libs"
llvm-ar-19 rcsD "$out" "${objs[@]}"
printf '%s\n' "${libs[@]}" > "$out.libs"
SH
  chmod +x "$tbin"/*
  # fixed mtimes: ninja then sees the same tools on every run (and rebuilds only what really changed)
  find "$tools" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
}

# meson_env CMD...: run CMD with the tools importable (meson, and ninja's calls back into meson).
meson_env() { PYTHONPATH="$tools/stubs:$tpy" "$@"; }

# meson_cross_file FILE [CFLAG...]: the cross file for wasm32-wasi; the CFLAGs are added for this package only.
meson_cross_file() {
  local q; q() { local s="" a; for a in "$@"; do s="$s'$a', "; done; echo "[${s%, }]"; }
  local f=$1; shift
  local extra=("$@")
  cat > "$f" <<INI
[binaries]
c = '$tbin/wcc'
cpp = '$tbin/wcxx'
ar = 'llvm-ar-19'
strip = 'llvm-strip-19'
ranlib = 'llvm-ranlib-19'
python = '$tbin/python3'
pkg-config = 'false'

[host_machine]
system = 'wasi'
cpu_family = 'wasm32'
cpu = 'wasm32'
endian = 'little'

[properties]
needs_exe_wrapper = true
longdouble_format = 'IEEE_QUAD_LE'

[built-in options]
c_args = $(q $EXT_CFLAGS "${extra[@]}")
cpp_args = $(q $EXT_CFLAGS "${extra[@]}")
INI
}

# meson_native_file FILE: build-machine tools (Cython runs on the build machine).
meson_native_file() {
  printf "[binaries]\ncython = '%s'\n" "$tbin/cython" > "$1"
}

# collect_modules BUILDDIR PKGDIR: every extension archive under BUILDDIR becomes a line of PKGDIR/modules.txt
# (dotted name from its path, PyInit_<leaf>) and its archive and helper libraries go to PKGDIR/lib.
collect_modules() {
  local b=$1 d=$2 f rel name leaf n=0
  mkdir -p "$d/lib"; : > "$d/modules.txt"
  while read -r f; do
    rel=${f#"$b"/}; rel=${rel%%.cpython-*}; name=${rel//\//.}; leaf=${name##*.}
    echo "$name PyInit_$leaf" >> "$d/modules.txt"
    cp "$f" "$d/lib/mod-${name//./_}.a"
    [ -s "$f.libs" ] && cat "$f.libs" >> "$d/helper-libs.txt"
    n=$((n + 1))
  done < <(find "$b" -name '*.cpython-*.so' | sort)
  if [ -s "$d/helper-libs.txt" ]; then
    # meson makes its internal static libraries thin archives (members by path): copy their members, not the index
    sort -u "$d/helper-libs.txt" | grep -v "^$" | while read -r l; do
      local dest="$d/lib/helper-$(basename "$l")"
      if [ "$(head -c 7 "$l")" = '!<thin>' ]; then
        rm -f "$dest"; llvm-ar-19 rcsD "$dest" $(llvm-ar-19 t "$l")
      else
        cp "$l" "$dest"
      fi
    done
  fi
  echo "$n"
}
