//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/internal/npmtest"
)

// stallScript never answers initialize: it records its pid and its environment, then sleeps.
const stallScript = `echo $$ > "$1"
env > "$2"
exec sleep 300
`

func stallServer(t *testing.T) (spec, pidf, envf string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "stall.sh")
	if err := os.WriteFile(script, []byte(stallScript), 0o755); err != nil {
		t.Fatal(err)
	}
	pidf, envf = filepath.Join(dir, "pid"), filepath.Join(dir, "env")
	return "sh " + script + " " + pidf + " " + envf, pidf, envf
}

// TestRunMCPConnectIsBoundedByTimeout: `--timeout 2s` bounds the wait for a server that never answers
// initialize (it held the CLI 30 s, the client's own connect timeout), and the server is gone afterwards.
func TestRunMCPConnectIsBoundedByTimeout(t *testing.T) {
	spec, pidf, _ := stallServer(t)
	start := time.Now()
	code, _, errOut := cli(t, "", "run", "--timeout", "2s", "--mcp", spec, "-c", "pass")
	d := time.Since(start)
	if code != exitFailure || !strings.Contains(errOut, "handshake did not finish") {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if d > 10*time.Second {
		t.Fatalf("the CLI waited %v for the server against --timeout 2s", d)
	}
	b, _ := os.ReadFile(pidf)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		if s, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil || !strings.Contains(string(s), ") Z") {
			t.Errorf("the stalled server %d still runs", pid)
		}
	}
	// --mcp-connect-timeout sets the wait on its own.
	start = time.Now()
	code, _, errOut = cli(t, "", "run", "--timeout", "60s", "--mcp-connect-timeout", "500ms", "--mcp", spec, "-c", "pass")
	if code != exitFailure || time.Since(start) > 10*time.Second {
		t.Fatalf("--mcp-connect-timeout 500ms: exit %d after %v: %s", code, time.Since(start), errOut)
	}
}

// TestRunMCPEnv: a stdio server gets no secret of the CLI's environment; --mcp-env passes one by name or sets one.
func TestRunMCPEnv(t *testing.T) {
	t.Setenv("WASMBOX_TEST_SECRET_TOKEN", "hunter2-secret")
	t.Setenv("WASMBOX_TEST_PASSED", "passed-by-name")
	spec, _, envf := stallServer(t)
	code, _, errOut := cli(t, "", "run", "--mcp-connect-timeout", "1s", "--mcp-env", "WASMBOX_TEST_PASSED",
		"--mcp-env", "WASMBOX_TEST_SET=set-here", "--mcp", spec, "-c", "pass")
	if code != exitFailure {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(envf)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	if strings.Contains(env, "hunter2") {
		t.Errorf("the CLI's secret reached the server:\n%s", env)
	}
	for _, want := range []string{"WASMBOX_TEST_PASSED=passed-by-name", "WASMBOX_TEST_SET=set-here", "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("the server's environment lacks %s:\n%s", want, env)
		}
	}
	if code, _, errOut := cli(t, "", "run", "--mcp-env", "=x", "-c", "pass"); code != exitUsage {
		t.Errorf("--mcp-env =x: exit %d: %s", code, errOut)
	}
}

// TestRunMCPToolsNeedApprovalByDefault: without a policy, server-everything's tools need approval, whatever
// its annotations claim: --approve deny (the default) denies echo (which it calls read-only) and its fetching
// tool; --approve allow lets echo run.
func TestRunMCPToolsNeedApprovalByDefault(t *testing.T) {
	argv := npmtest.Everything(t, "stdio")
	prog := `import tools
for f, kw in ((tools.echo, {"message": "hi"}), (tools.gzip_file_as_resource, {"data": "data:text/plain,hello"})):
    try:
        f(**kw)
        print("ran")
    except tools.ApprovalDenied:
        print("denied")
`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "denied\ndenied\n"},
		{[]string{"--approve", "deny"}, "denied\ndenied\n"},
		{[]string{"--approve", "allow"}, "ran\nran\n"},
	} {
		args := append([]string{"run", "--mcp", strings.Join(argv, " ")}, tc.args...)
		code, out, errOut := cli(t, "", append(args, "-c", prog)...)
		if code != 0 || out != tc.want {
			t.Errorf("%v: exit %d, stdout %q, want %q; stderr %s", tc.args, code, out, tc.want, errOut)
		}
	}
}
