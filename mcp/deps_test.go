package mcp

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSandboxDoesNotDependOnTheMCPSDK: programs that import only the sandbox do not download the MCP SDK.
func TestSandboxDoesNotDependOnTheMCPSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/wasmbox/wasmbox/wasmbox").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "modelcontextprotocol") {
		t.Fatal("package wasmbox depends on the MCP SDK")
	}
	if !strings.Contains(string(out), "github.com/wasmbox/wasmbox/hostfuncs") {
		t.Fatalf("go list output looks wrong:\n%s", out)
	}
}
