package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/npmtest"
)

// TestRunStorePauseApproveResume is the CLI's durable-task cycle with a real MCP server (server-everything,
// whose tools need approval by default) and a SQLite store: run pauses with its own exit code and names the
// task, approvals list/show/approve record the decision, resume finishes the program without calling the first
// tool again, and a second decision or resume is refused.
func TestRunStorePauseApproveResume(t *testing.T) {
	mcpArg := strings.Join(npmtest.Everything(t, "stdio"), " ")
	db := "sqlite:" + filepath.Join(t.TempDir(), "tasks.db")
	prog := `import tools
print("before")
print(tools.echo(message="hi \u202e there"))
print("after")
`
	code, out, errOut := cli(t, "", "run", "--store", db, "--mcp", mcpArg, "--task-id", "cli-1", "-c", prog)
	if code != exitPaused || out != "before\n" || !strings.Contains(errOut, "task cli-1 paused: call 1") {
		t.Fatalf("run --store: exit %d, stdout %q, stderr %s; want exit %d after printing before", code, out, errOut, exitPaused)
	}
	code, out, errOut = cli(t, "", "approvals", "list", "--store", db)
	if code != 0 || !strings.Contains(out, "cli-1") || !strings.Contains(out, `"echo"`) {
		t.Fatalf("approvals list: exit %d, %s %s", code, out, errOut)
	}
	code, out, _ = cli(t, "", "approvals", "show", "--store", db, "cli-1")
	if code != 0 || !strings.Contains(out, `\u202e`) || strings.Contains(out, "\u202e") {
		t.Fatalf("approvals show must show the arguments with the bidi override escaped: exit %d\n%s", code, out)
	}
	code, out, errOut = cli(t, "", "approvals", "list", "--store", db, "--json")
	var pend []governance.PendingCall
	var args struct{ Message string }
	if code != 0 || json.Unmarshal([]byte(out), &pend) != nil || len(pend) != 1 || json.Unmarshal(pend[0].Args, &args) != nil || args.Message != "hi \u202e there" {
		t.Fatalf("approvals list --json: exit %d, %s %s", code, out, errOut)
	}
	// Resume before the decision: still paused, nothing run.
	if code, _, errOut = cli(t, "", "resume", "--store", db, "--mcp", mcpArg, "cli-1"); code != exitPaused {
		t.Fatalf("resume before the decision: exit %d (%s); want %d", code, errOut, exitPaused)
	}
	if code, out, errOut = cli(t, "", "approvals", "approve", "--store", db, "--by", "alice", "--reason", "fine", "cli-1", "1"); code != 0 || !strings.Contains(out, "approver:cli:alice") {
		t.Fatalf("approvals approve: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut = cli(t, "", "approvals", "deny", "--store", db, "cli-1", "1"); code != exitRemapped || !strings.Contains(errOut, "already decided") {
		t.Fatalf("a second decision: exit %d, %s; want it refused", code, errOut)
	}
	code, out, errOut = cli(t, "", "resume", "--store", db, "--mcp", mcpArg, "--json", "cli-1")
	var res jsonResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("resume: exit %d, %v: %s %s", code, err, out, errOut)
	}
	if !regexp.MustCompile(`^before\n.*hi \x{202e} there.*\nafter\n$`).MatchString(res.Stdout) || res.TaskID != "cli-1" || res.Paused != nil {
		t.Fatalf("resumed run: %+v", res)
	}
	if code, _, errOut = cli(t, "", "resume", "--store", db, "--mcp", mcpArg, "cli-1"); code != exitFailure || !strings.Contains(errOut, "ended") {
		t.Fatalf("resuming a done task: exit %d, %s", code, errOut)
	}
	if code, _, errOut = cli(t, "", "resume", "--store", db, "no-such-task"); code != exitFailure || !strings.Contains(errOut, "unknown task") {
		t.Fatalf("resume of an unknown task: exit %d, %s", code, errOut)
	}
}

func TestTaskFlagsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"resume", "x"},                         // no store
		{"run", "--task-id", "x", "-c", "pass"}, // --task-id without --store
		{"run", "--store", "sqlite:/nonexistent-dir/x.db", "--stdin", "-c", "pass"},
		{"approvals", "list"}, // no store
		{"approvals"},
	} {
		t.Setenv("WASMBOX_STORE", "")
		if code, _, errOut := cli(t, "", args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s); want %d", args, code, errOut, exitUsage)
		}
	}
}

func TestApprovalsServeStaysOnLoopback(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "tasks.db")
	if code, _, errOut := cli(t, "", "approvals", "serve", "--store", db, "--http", "0.0.0.0:0"); code != exitUsage || !strings.Contains(errOut, "not a loopback address") {
		t.Fatalf("approvals serve on 0.0.0.0 without --allow-remote: exit %d, %s", code, errOut)
	}
}
