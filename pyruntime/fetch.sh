#!/usr/bin/env bash
# fetch.sh DIR — download every pinned input of the interpreter build from Debian's archive into DIR,
# using a private apt configuration so the machine's own apt state is never touched.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
dl=${1:?usage: fetch.sh DIR}
mkdir -p "$dl"
dl=$(cd "$dl" && pwd)
apt_dir="$dl/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/etc"
cat > "$apt_dir/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR trixie main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR trixie-updates main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR trixie-updates main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_SECURITY_MIRROR trixie-security main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_SECURITY_MIRROR trixie-security main
SRC
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o Dir::State::status=/dev/null
  -o APT::Get::Only-Source=false -o Debug::NoLocking=1)

have_all() {
  for f in $ORIG_TARBALLS; do [ -s "$dl/$f" ] || return 1; done
  ls "$dl"/wasi-libc_"${WASI_LIBC_VERSION#*:}"_all.deb >/dev/null 2>&1 || return 1
  [ -s "$dl/tzdata.deb" ] && [ -s "$dl/tzdata-legacy.deb" ] || return 1
}
if have_all; then echo "fetch: all inputs present in $dl"; exit 0; fi

apt-get "${apt_opts[@]}" -qq update
cd "$dl"
apt-get "${apt_opts[@]}" -qq download "wasi-libc=$WASI_LIBC_VERSION"
apt-get "${apt_opts[@]}" -qq download "tzdata=$TZDATA_VERSION"
mv -f tzdata_*.deb tzdata.deb
# the backward-compatible names (US/Pacific, EST5EDT, Etc/...), which Debian 13 moved to a package of their own
apt-get "${apt_opts[@]}" -qq download "tzdata-legacy=$TZDATA_VERSION"
mv -f tzdata-legacy_*.deb tzdata-legacy.deb
# Only the upstream .orig tarballs are used; some security .dsc files 404, so fetch each source package on its own
# and tolerate a failure as long as the orig tarball arrived.
for src in "python3.13=$PYTHON_DEB_VERSION" "sqlite3=$SQLITE_DEB_VERSION" "zlib=$ZLIB_DEB_VERSION" \
           "bzip2=$BZIP2_DEB_VERSION" "xz-utils=$XZ_DEB_VERSION"; do
  apt-get "${apt_opts[@]}" -qq source --download-only "$src" || echo "fetch: note: apt-get source $src reported an error" >&2
done
for f in $ORIG_TARBALLS; do
  [ -s "$dl/$f" ] || { echo "fetch: missing $f after download" >&2; exit 1; }
done
echo "fetch: done"
