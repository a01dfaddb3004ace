package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func orders(t *testing.T, stdin string, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String()
}

// lockedBuffer is a bytes.Buffer safe for the approver's writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// The program's clock stops while a person decides: an answer that comes after the program's own 1 s limit
// still approves the refund, and the question offers the gate's approval timeout (60 s), not what is left of
// the program's time.
func TestApprovalPausesTheProgramClock(t *testing.T) {
	in, answer := io.Pipe()
	var errb lockedBuffer
	defer answer.Close()
	go func() {
		for end := time.Now().Add(30 * time.Second); !strings.Contains(errb.String(), "Approve? [y/N]"); {
			if time.Now().After(end) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(1500 * time.Millisecond) // longer than the program's limit
		_, _ = answer.Write([]byte("y\n"))
	}()
	var out bytes.Buffer
	code := run(context.Background(), []string{"-code", "testdata/refund.py", "-approve", "prompt", "-timeout", "1s"}, in, &out, &errb)
	if code != 0 || !strings.HasPrefix(out.String(), "refunded 50\n") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "answer within 1m0s") {
		t.Errorf("the question does not offer the approval timeout:\n%s", errb.String())
	}
}

func TestEUTotal(t *testing.T) {
	code, out := orders(t, "", "-code", "testdata/eu_total.py")
	if code != 0 || out != "1218.5\ntool_calls: 5 allowed, 0 denied\n" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
}

func TestMaxToolCalls(t *testing.T) {
	code, out := orders(t, "", "-code", "testdata/eu_total.py", "-max-tool-calls", "3")
	if code != 1 || !strings.HasSuffix(out, "tool_calls: 3 allowed, 1 denied\n") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
}

func TestApprovals(t *testing.T) {
	for approve, want := range map[string]string{
		"allow":   "refunded 50\ntool_calls: 1 allowed, 0 denied\n",
		"deny":    "not refunded: ApprovalDenied\ntool_calls: 0 allowed, 1 denied\n",
		"timeout": "not refunded: ApprovalTimeout\ntool_calls: 0 allowed, 1 denied\n",
	} {
		code, out := orders(t, "", "-code", "testdata/refund.py", "-approve", approve)
		if code != 0 || out != want {
			t.Errorf("%s: exit %d, stdout %q, want %q", approve, code, out, want)
		}
	}
	code, out := orders(t, "y\n", "-code", "testdata/refund.py", "-approve", "prompt")
	if code != 0 || !strings.HasPrefix(out, "refunded 50\n") {
		t.Errorf("prompt y: exit %d, %q", code, out)
	}
}

// The audit file written by the example verifies with the CLI, and an edit is caught.
func TestAuditFileVerifies(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	if code, out := orders(t, "", "-code", "testdata/eu_total.py", "-audit", log); code != 0 {
		t.Fatalf("exit %d %q", code, out)
	}
	verify := func() int {
		cmd := exec.Command("go", "run", "../../cmd/wasmbox", "audit", "verify", log)
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if c := verify(); c != 0 {
		t.Fatalf("intact log: exit %d", c)
	}
	b, _ := os.ReadFile(log)
	os.WriteFile(log, bytes.Replace(b, []byte("A-1003"), []byte("A-1009"), 1), 0o600)
	if c := verify(); c != 1 {
		t.Fatalf("edited log: exit %d, want 1", c)
	}
}
