#!/usr/bin/env bash
# fetch.sh DIR PART... — download the pinned inputs of the sci build from Debian's archive into DIR through a
# private apt configuration (the machine's apt state is untouched), like pyruntime/fetch.sh.
#
# PART is tools (meson, Cython, meson-python), numpy, numpydev (numpy's C headers), pandas, pydeps (pandas'
# pure-Python dependencies) or suites (pytest and the test suites' imports, for sci/suites). Each downloaded
# file is checked against inputs.sha256 by build.sh (and sci/suites/prepare.sh). A part whose file the archive
# does not serve is an error that names the file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
dl=${1:?usage: fetch.sh DIR PART...}; shift
mkdir -p "$dl"; dl=$(cd "$dl" && pwd)
apt_dir="$dl/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/etc"
cat > "$apt_dir/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR trixie main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR trixie main
SRC
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o Dir::State::status=/dev/null
  -o APT::Get::Only-Source=false -o Debug::NoLocking=1)
updated=0
update() { [ "$updated" = 1 ] || { apt-get "${apt_opts[@]}" -qq update; updated=1; }; }
cd "$dl"
# binary NAME VERSION FILE: apt-get download, then check that the expected file arrived.
binary() {
  [ -s "$3" ] && return 0
  update
  apt-get "${apt_opts[@]}" -qq download "$1=$2" || true
  # apt writes ':' in an epoch as %3a
  [ -s "$3" ] || { echo "fetch: $1=$2 did not download ($3)" >&2; exit 1; }
}
# orig SRC VERSION FILE: apt-get source --download-only; only the upstream tarball is used, so a 404 on the .dsc
# or the Debian tarball is tolerated as long as FILE arrived.
orig() {
  [ -s "$3" ] && return 0
  update
  apt-get "${apt_opts[@]}" -qq source --download-only "$1=$2" >"$dl/apt/$1.log" 2>&1 || true
  if ! [ -s "$3" ]; then
    echo "fetch: $3 (source package $1=$2) was not served by $DEBIAN_MIRROR:" >&2
    grep -E '^E:' "$dl/apt/$1.log" >&2 || true
    exit 1
  fi
}
for part in "$@"; do
  case "$part" in
    tools)
      binary meson "$MESON_DEB_VERSION" "$MESON_DEB"
      binary cython3 "$CYTHON_DEB_VERSION" "$CYTHON_DEB"
      binary python3-mesonpy "$MESONPY_DEB_VERSION" "$MESONPY_DEB";;
    numpy)  orig numpy "$NUMPY_DEB_VERSION" "$NUMPY_ORIG";;
    numpydev) binary python3-numpy-dev "$NUMPYDEV_DEB_VERSION" "$NUMPYDEV_DEB"
              binary python3-numpy "$NUMPYBIN_DEB_VERSION" "$NUMPYBIN_DEB";;
    pandas) orig pandas "$PANDAS_DEB_VERSION" "$PANDAS_ORIG";;
    pydeps) binary python3-dateutil "$DATEUTIL_DEB_VERSION" "$DATEUTIL_DEB"
            binary python3-six "$SIX_DEB_VERSION" "$SIX_DEB"
            binary python3-pytz "$PYTZ_DEB_VERSION" "$PYTZ_DEB";;
    suites) for pv in $SUITE_DEBS; do binary "${pv%%=*}" "${pv#*=}" "${pv%%=*}_${pv#*=}_all.deb"; done;;
    *) echo "fetch: unknown part $part" >&2; exit 2;;
  esac
done
echo "fetch: $* present in $dl"
