#!/usr/bin/env bash
# Private container engines for the escalate/ tests.
#
#   .ci/escalation.sh [start] [DIR]   start everything (idempotent); print `export NAME=value` lines on stdout
#   .ci/escalation.sh stop [DIR]      stop the engines, unmount and delete DIR
#   .ci/escalation.sh env [DIR]       print the export lines of engines already started
#
# DIR defaults to /tmp/wasmbox-docker. Progress goes to stderr; stdout carries only the export lines, so
#   eval "$(.ci/escalation.sh start)"
# sets the environment the tests read. The same lines are written to DIR/env.
#
# What it does (needs root, Debian 12; everything below is skipped when already done):
#  1. apt-get installs docker.io (dockerd 20.10, API 1.41), python3 and python3-pip if missing. The package's
#     service is never started (no systemd here; a policy-rc.d refusing starts is installed for the install).
#  2. Builds runsc (gVisor) statically at a pinned version, cached in $WASMBOX_CACHE (default /var/cache/wasmbox).
#     A cgo build links dynamically and every sandbox dies; CGO_ENABLED=0 is required.
#  3. Fetches Docker 26.1.5 (API 1.45) from Debian trixie with a private apt configuration and unpacks it with
#     dpkg-deb -x (nothing is installed; bookworm's runc stays first on its PATH: trixie's needs GLIBC 2.38).
#     Best effort: if it fails, only the first engine runs and a warning says so. WASMBOX_NEW_ENGINE=0 skips it.
#  4. Starts, per engine, a private containerd and dockerd: own sockets, data root, exec root, pid files and
#     cgroup parent under DIR, with --iptables=false --bridge=none --ip-forward=false --ip-masq=false, so the host's
#     network configuration is never touched; runsc is registered as the runtime "runsc" (--platform=systrap,
#     --host-uds=open so a sandbox can connect to the bind-mounted tool socket, --oci-seccomp so Docker's default
#     seccomp profile also applies inside the sandbox).
#  5. Imports a fixture image without a registry (docker import of a rootfs tarball: the host's python3.11, its
#     standard library, pip, dash and the shared libraries ldd names), tagged wasmbox-test-python:latest.
#
# Exported: WASMBOX_DOCKER_HOST (the first engine), WASMBOX_DOCKER_HOSTS (every engine, comma-separated),
# WASMBOX_TEST_IMAGE, WASMBOX_RUNSC (path of the runsc binary).
set -euo pipefail

RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237
FIXTURE_IMAGE=wasmbox-test-python:latest
FIXTURE_VERSION=2 # bump when the fixture's contents change: the image is re-imported
CACHE=${WASMBOX_CACHE:-/var/cache/wasmbox}

cmd=start
case "${1:-}" in start | stop | env) cmd=$1; shift ;; esac
DIR=${1:-/tmp/wasmbox-docker}
case "$DIR" in /*) ;; *) echo "escalation.sh: DIR must be absolute: $DIR" >&2; exit 2 ;; esac

log() { echo "escalation.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# running PID: the process exists and is not a zombie.
running() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]; }
# alive PIDFILE: the process named in PIDFILE is running.
alive() { [ -s "$1" ] && running "$(cat "$1")"; }

engines() { # the engine directories that have a live dockerd, in order
	local e
	for e in d20 d26; do
		if alive "$DIR/$e/dockerd.pid" && [ -S "$DIR/$e/docker.sock" ]; then echo "$e"; fi
	done
}

print_env() {
	local hosts="" e
	for e in $(engines); do hosts="${hosts:+$hosts,}unix://$DIR/$e/docker.sock"; done
	[ -n "$hosts" ] || die "no engine is running under $DIR"
	{
		echo "export WASMBOX_DOCKER_HOST=${hosts%%,*}"
		echo "export WASMBOX_DOCKER_HOSTS=$hosts"
		echo "export WASMBOX_TEST_IMAGE=$FIXTURE_IMAGE"
		echo "export WASMBOX_RUNSC=$CACHE/runsc-$RUNSC_VERSION/runsc"
	} | tee "$DIR/env"
}

stop_pid() { # stop_pid PIDFILE NAME: SIGTERM, wait up to 20 s, then SIGKILL
	local f=$1 name=$2 pid i
	[ -s "$f" ] || return 0
	pid=$(cat "$f")
	if running "$pid"; then
		log "stopping $name (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 200); do running "$pid" || break; sleep 0.1; done
		if running "$pid"; then log "$name did not stop; killing it"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
	fi
	rm -f "$f"
}

unmount_below() { # unmount whatever is still mounted below $1 (overlay layers, shm, netns), deepest first
	awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
}

stop_all() {
	local e m
	for e in d26 d20; do
		[ -d "$DIR/$e" ] || continue
		stop_pid "$DIR/$e/dockerd.pid" "dockerd ($e)"
		stop_pid "$DIR/$e/containerd.pid" "containerd ($e)"
		# Leftover shims (a dockerd killed hard leaves them): only those started for this DIR.
		for m in $(pgrep -f "containerd-shim.*-address $DIR/$e/" 2>/dev/null || true); do kill -KILL "$m" 2>/dev/null || true; done
	done
	unmount_below "$DIR"
	for e in d20 d26; do # the cgroup parents created for our containers
		for m in /sys/fs/cgroup/*/"wasmbox-$e"; do [ -d "$m" ] && rmdir "$m" 2>/dev/null || true; done
	done
	rm -rf "$DIR"
}

# --- 1. packages ---------------------------------------------------------------------------------------------
install_packages() {
	local need=()
	{ command -v dockerd >/dev/null && [ -x /usr/bin/docker ]; } || need+=(docker.io)
	command -v python3.11 >/dev/null || need+=(python3)
	[ -d /usr/lib/python3/dist-packages/pip ] || need+=(python3-pip)
	[ ${#need[@]} -eq 0 ] && return 0
	log "apt-get install ${need[*]}"
	local rc=/usr/sbin/policy-rc.d restore=""
	# Refuse service starts during the install: a default dockerd would create docker0 and iptables rules.
	if [ -e "$rc" ]; then restore=$(mktemp); cp -p "$rc" "$restore"; fi
	printf '#!/bin/sh\nexit 101\n' >"$rc"; chmod 755 "$rc"
	local status=0
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } >&2 || status=$?
	if [ -n "$restore" ]; then mv "$restore" "$rc"; else rm -f "$rc"; fi
	[ $status -eq 0 ] || die "apt-get install failed"
}

# --- 2. runsc --------------------------------------------------------------------------------------------------
build_runsc() {
	local out="$CACHE/runsc-$RUNSC_VERSION"
	if [ -x "$out/runsc" ] && ! ldd "$out/runsc" >/dev/null 2>&1; then return 0; fi # cached, static
	log "building runsc $RUNSC_VERSION statically (about 75 s, longer on a cold module cache)"
	mkdir -p "$out"
	(cd / && CGO_ENABLED=0 GOFLAGS= GOBIN="$out" go install "gvisor.dev/gvisor/runsc@$RUNSC_VERSION") >&2 ||
		die "building runsc failed"
	if ldd "$out/runsc" >/dev/null 2>&1; then rm -f "$out/runsc"; die "runsc is dynamically linked"; fi
}

# --- 3. Docker 26 from trixie, unpacked ------------------------------------------------------------------------
fetch_docker26() {
	local a="$CACHE/docker-trixie"
	if [ -x "$a/root/usr/sbin/dockerd" ] && [ -x "$a/root/usr/bin/containerd" ]; then return 0; fi
	log "fetching docker.io and containerd from trixie (unpacked into $a/root, not installed)"
	rm -rf "$a" && mkdir -p "$a/state/lists/partial" "$a/cache/archives/partial" "$a/debs" "$a/root"
	echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' >"$a/sources.list"
	local o=(-o "Dir::Etc::SourceList=$a/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State=$a/state" -o Dir::State::status=/var/lib/dpkg/status -o "Dir::Cache=$a/cache"
		-o APT::Architecture=amd64 -o Acquire::Languages=none -o APT::Sandbox::User=root
		-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
		-o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false
		-o Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false
		-o Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false
		-o Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false)
	apt-get "${o[@]}" update -qq >&2 || return 1
	(cd "$a/debs" && apt-get "${o[@]}" download docker.io containerd >&2) || return 1
	local d
	for d in "$a"/debs/*.deb; do dpkg-deb -x "$d" "$a/root" || return 1; done
	"$a/root/usr/sbin/dockerd" --version >&2 || return 1
}

# --- 4. engines ------------------------------------------------------------------------------------------------
# start_engine NAME DOCKERD CONTAINERD PATH
start_engine() {
	local e=$1 dockerd=$2 containerd=$3 path=$4 d="$DIR/$1" i
	if alive "$d/dockerd.pid" && [ -S "$d/docker.sock" ]; then
		DOCKER_HOST="unix://$d/docker.sock" /usr/bin/docker version --format '{{.Server.Version}}' >/dev/null 2>&1 && return 0
	fi
	# Not running (or a previous session's processes were killed): start from a clean slate.
	stop_pid "$d/dockerd.pid" "dockerd ($e)"
	stop_pid "$d/containerd.pid" "containerd ($e)"
	unmount_below "$d"
	rm -rf "$d"
	mkdir -p "$d/containerd" "$d/data" "$d/exec"
	chmod 711 "$DIR" "$d"
	cat >"$d/containerd.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$d/containerd/containerd.sock"
[ttrpc]
  address = "$d/containerd/containerd.sock.ttrpc"
[debug]
  address = "$d/containerd/debug.sock"
EOF
	cat >"$d/daemon.json" <<EOF
{
  "runtimes": {
    "runsc": {"path": "$CACHE/runsc-$RUNSC_VERSION/runsc", "runtimeArgs": ["--platform=systrap", "--host-uds=open", "--oci-seccomp"]}
  },
  "cgroup-parent": "/wasmbox-$e"
}
EOF
	log "starting containerd ($e)"
	PATH=$path setsid "$containerd" --config "$d/containerd.toml" </dev/null >"$d/containerd.log" 2>&1 &
	echo $! >"$d/containerd.pid"
	for i in $(seq 1 100); do [ -S "$d/containerd/containerd.sock" ] && break; sleep 0.1; done
	[ -S "$d/containerd/containerd.sock" ] || { tail -20 "$d/containerd.log" >&2; die "containerd ($e) did not start"; }
	log "starting dockerd ($e): $("$dockerd" --version)"
	PATH=$path setsid "$dockerd" -H "unix://$d/docker.sock" --containerd "$d/containerd/containerd.sock" \
		--data-root "$d/data" --exec-root "$d/exec" --pidfile "$d/dockerd.pid" --config-file "$d/daemon.json" \
		--iptables=false --bridge=none --ip-forward=false --ip-masq=false --userland-proxy=false \
		</dev/null >"$d/dockerd.log" 2>&1 &
	for i in $(seq 1 300); do
		DOCKER_HOST="unix://$d/docker.sock" /usr/bin/docker version >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	tail -30 "$d/dockerd.log" >&2
	return 1
}

# --- 5. fixture image ------------------------------------------------------------------------------------------
build_fixture() {
	local tarball="$DIR/fixture-$FIXTURE_VERSION.tar"
	[ -s "$tarball" ] && return 0
	log "building the fixture rootfs"
	local root
	root=$(mktemp -d "$DIR/rootfs.XXXXXX")
	local py=/usr/bin/python3.11 stdlib=/usr/lib/python3.11
	local files=("$py" /usr/bin/dash)
	local libs
	libs=$( { ldd "$py"; ldd /usr/bin/dash; ldd "$stdlib"/lib-dynload/*.so; } 2>/dev/null |
		awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $2 ~ /^\(0x/ { print $1 }' | sort -u)
	# cp -L --parents keeps absolute paths and dereferences symlinks (like tar -h).
	# shellcheck disable=SC2086
	cp -L --parents "${files[@]}" $libs "$root"/
	mkdir -p "$root/usr/lib/python3/dist-packages"
	tar -C / --exclude='python3.11/test' --exclude='python3.11/idlelib' --exclude='python3.11/tkinter' \
		--exclude='python3.11/turtledemo' --exclude='python3.11/EXTERNALLY-MANAGED' -cf - "${stdlib#/}" | tar -C "$root" -xf -
	cp -a /usr/lib/python3/dist-packages/pip "$root/usr/lib/python3/dist-packages/"
	ln -s python3.11 "$root/usr/bin/python3"
	ln -s python3 "$root/usr/bin/python"
	ln -s dash "$root/usr/bin/sh"
	ln -s usr/bin "$root/bin" 2>/dev/null || true
	mkdir -p "$root/tmp" "$root/var/tmp" "$root/etc" "$root/workspace" "$root/run" "$root/proc" "$root/sys" "$root/dev"
	chmod 1777 "$root/tmp" "$root/var/tmp" # /var/tmp stays on the rootfs: writes must fail with EROFS, not EACCES
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	tar --numeric-owner -C "$root" -cf "$tarball.part" .
	mv "$tarball.part" "$tarball"
	rm -rf "$root"
}

import_fixture() { # import_fixture ENGINE
	local h="unix://$DIR/$1/docker.sock" have
	have=$(DOCKER_HOST=$h /usr/bin/docker image inspect --format '{{index .Config.Labels "wasmbox.fixture"}}' "$FIXTURE_IMAGE" 2>/dev/null || true)
	[ "$have" = "$FIXTURE_VERSION" ] && return 0
	build_fixture
	log "importing $FIXTURE_IMAGE into $1"
	DOCKER_HOST=$h /usr/bin/docker import \
		--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'CMD ["python3"]' \
		--change "LABEL wasmbox.fixture=$FIXTURE_VERSION" \
		"$DIR/fixture-$FIXTURE_VERSION.tar" "$FIXTURE_IMAGE" >/dev/null
}

case $cmd in
stop)
	stop_all
	log "stopped; $DIR removed"
	exit 0
	;;
env)
	print_env
	exit 0
	;;
esac

[ "$(id -u)" -eq 0 ] || die "needs root (dockerd, containerd and runsc run as root here)"
mkdir -p "$DIR" "$CACHE"
start=$SECONDS
install_packages
build_runsc

# Bookworm's runc first on every engine's PATH.
mkdir -p "$DIR/bin"
ln -sf "$(command -v runc)" "$DIR/bin/runc"
base_path="$DIR/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

start_engine d20 "$(command -v dockerd)" "$(command -v containerd)" "$base_path" || die "dockerd (d20) did not start"
import_fixture d20

if [ "${WASMBOX_NEW_ENGINE:-1}" != 0 ]; then
	if fetch_docker26; then
		t="$CACHE/docker-trixie/root/usr"
		if start_engine d26 "$t/sbin/dockerd" "$t/bin/containerd" "$DIR/bin:$t/bin:$t/sbin:$base_path"; then
			import_fixture d26
		else
			log "WARNING: the second engine (Docker 26 from trixie) did not start; testing against one engine only"
			stop_pid "$DIR/d26/dockerd.pid" "dockerd (d26)"
			stop_pid "$DIR/d26/containerd.pid" "containerd (d26)"
		fi
	else
		log "WARNING: could not fetch Docker 26 from trixie; testing against one engine only"
	fi
fi
log "ready in $((SECONDS - start)) s"
print_env
