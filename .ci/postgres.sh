#!/usr/bin/env bash
# A real PostgreSQL (Debian's package) for the store tests and bench/compare:
#   eval "$(.ci/postgres.sh start)"   installs postgresql if needed, initdb in a temporary directory, starts it on a
#                                     free loopback port, prints the export lines (WASMBOX_TEST_POSTGRES, and what
#                                     stop needs)
#   .ci/postgres.sh stop              stops it and removes its directory
# Everything but the export lines goes to stderr. The server runs as the postgres user (it refuses root).
set -euo pipefail
case "${1:-}" in
start)
	bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
	installed=0
	if [ -z "$bin" ] || [ ! -x "$bin/pg_ctl" ]; then
		echo "postgres.sh: installing Debian's postgresql" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
		bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
		installed=1
	fi
	# Installing the package starts a cluster of its own on 5432, which the tests never use (theirs is on a port
	# of its own): stop that one, which this script started, and never a cluster that was there before it.
	if [ "$installed" = 1 ] && command -v pg_lsclusters >/dev/null 2>&1; then
		pg_lsclusters -h 2>/dev/null | while read -r ver name _; do pg_ctlcluster "$ver" "$name" stop >/dev/null 2>&1 || true; done
	fi
	dir=$(mktemp -d /tmp/wasmbox-ci-pg.XXXXXX)
	run=()
	if [ "$(id -u)" = 0 ]; then
		chown postgres: "$dir"
		run=(runuser -u postgres --)
	fi
	port=""
	for _ in $(seq 50); do # a free loopback port: nothing answers on it
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
	done
	[ -n "$port" ] || { echo "postgres.sh: no free port" >&2; exit 1; }
	"${run[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 >&2
	"${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >&2
	"$bin/pg_isready" -h 127.0.0.1 -p "$port" >&2
	"$bin/postgres" --version >&2
	echo "export WASMBOX_TEST_POSTGRES='postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable'"
	echo "export WASMBOX_CI_PG_DIR='$dir' WASMBOX_CI_PG_BIN='$bin'"
	;;
stop)
	if [ -n "${WASMBOX_CI_PG_DIR:-}" ] && [ -d "$WASMBOX_CI_PG_DIR/data" ]; then
		run=()
		[ "$(id -u)" = 0 ] && run=(runuser -u postgres --)
		"${run[@]}" "$WASMBOX_CI_PG_BIN/pg_ctl" -D "$WASMBOX_CI_PG_DIR/data" -m fast -w stop >&2 || true
		rm -rf "$WASMBOX_CI_PG_DIR"
	fi
	;;
*)
	echo "usage: .ci/postgres.sh start|stop" >&2
	exit 2
	;;
esac
