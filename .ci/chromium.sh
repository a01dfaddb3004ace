#!/usr/bin/env bash
# Installs Debian's Chromium (for internal/approvals' browser test, which drives the approvals page in a real
# headless browser) and prints the environment line that points the test at it:
#   eval "$(.ci/chromium.sh)"
# Debian 12; needs root or sudo. Runs apt-get update only when the package lists do not know chromium (a fresh
# image) or when installing from stale lists fails.
set -euo pipefail
bin=/usr/bin/chromium
if [ ! -x "$bin" ]; then
	export DEBIAN_FRONTEND=noninteractive
	sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
	apt-cache show chromium >/dev/null 2>&1 || $sudo apt-get update >&2
	$sudo apt-get install -y --no-install-recommends chromium >&2 || {
		$sudo apt-get update >&2
		$sudo apt-get install -y --no-install-recommends chromium >&2
	}
fi
"$bin" --version >&2
echo "export WASMBOX_CHROMIUM=$bin"
