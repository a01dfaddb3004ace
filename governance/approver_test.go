package governance_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
)

// syncBuffer is a goroutine-safe strings.Builder.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func approvalRequest(tool, args string) governance.ApprovalRequest {
	return governance.ApprovalRequest{
		Call:        governance.Call{RunID: "r", Seq: 1, Tool: tool, Args: json.RawMessage(args), Effect: governance.Irreversible, Source: governance.SourcePython},
		Reason:      "irreversible call requires approval",
		DisplayArgs: json.RawMessage(args),
	}
}

func TestTerminalApprover(t *testing.T) {
	out := &syncBuffer{}
	ta := &governance.TerminalApprover{In: strings.NewReader("y\nno\n YES \n\n"), Out: out}
	ctx := context.Background()
	want := []bool{true, false, true, false}
	for i, w := range want {
		d, err := ta.Approve(ctx, approvalRequest("send_email", `{"to":"bob"}`))
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if d.Allow != w || d.DecidedBy != "approver:terminal" {
			t.Fatalf("answer %d: %+v, want allow=%v", i, d, w)
		}
	}
	// End of input denies, now and later.
	for i := 0; i < 2; i++ {
		if d, err := ta.Approve(ctx, approvalRequest("send_email", `{}`)); d.Allow || (err == nil && d.Reason == "") {
			t.Fatalf("at EOF: %+v %v", d, err)
		}
	}
	q := out.String()
	for _, s := range []string{"send_email", `{"to":"bob"}`, "irreversible call requires approval", "Approve? [y/N]", "run r, call 1"} {
		if !strings.Contains(q, s) {
			t.Fatalf("question lacks %q:\n%s", s, q)
		}
	}
}

func TestTerminalApproverEscapesControlSequences(t *testing.T) {
	out := &syncBuffer{}
	ta := &governance.TerminalApprover{In: strings.NewReader("n\n"), Out: out, MaxArgsBytes: 40}
	args := "{\"x\":\"\u009b2J\u202eevil\",\"pad\":\"" + strings.Repeat("a", 100) + "\"}"
	ta.Approve(context.Background(), approvalRequest("tool\x1b[2J", args))
	q := out.String()
	for _, bad := range []string{"\x1b", "\u009b", "\u202e"} {
		if strings.Contains(q, bad) {
			t.Fatalf("question contains raw %q", bad)
		}
	}
	if !strings.Contains(q, `tool\u001b[2J`) || !strings.Contains(q, "NOT SHOWN") || strings.Contains(q, strings.Repeat("a", 50)) {
		t.Fatalf("question:\n%s", q)
	}
}

func TestTerminalApproverTimeoutThroughGate(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	out := &syncBuffer{}
	tl := newTool()
	g := mustGate(t, governance.GateConfig{
		Policy:          governance.PolicyFunc(needsApproval),
		Approver:        &governance.TerminalApprover{In: pr, Out: out},
		ApprovalTimeout: 30 * time.Millisecond,
	})
	run := g.NewRun("r")
	if _, err := run.Do(context.Background(), call("pay", governance.Irreversible), tl.fn); !errors.Is(err, governance.ErrApprovalTimeout) {
		t.Fatalf("err = %v", err)
	}
	// A late "y" meant for the timed-out question must not approve the next one.
	if _, err := pw.Write([]byte("y\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the reader pick it up
	if _, err := run.Do(context.Background(), call("pay", governance.Irreversible), tl.fn); !errors.Is(err, governance.ErrApprovalTimeout) {
		t.Fatalf("second call: err = %v (a stale answer approved it?)", err)
	}
	if tl.runs.Load() != 0 {
		t.Fatal("tool ran")
	}
	if !strings.Contains(out.String(), "no answer in time") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestChanApprover(t *testing.T) {
	reqs := make(chan *governance.PendingApproval)
	audit := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{
		Policy:          governance.PolicyFunc(needsApproval),
		Approver:        governance.ChanApprover{C: reqs, Name: "web"},
		ApprovalTimeout: 5 * time.Second,
		Auditor:         audit,
	})
	go func() {
		for p := range reqs {
			if strings.Contains(string(p.Request.Call.Args), "yes") {
				if !p.Allow("clicked approve") {
					t.Error("answer not taken")
				}
				if p.Deny("second answer") {
					t.Error("second answer taken")
				}
			} else {
				p.Deny("clicked deny")
			}
		}
	}()
	defer close(reqs)
	run := g.NewRun("r")
	tl := newTool()
	c := call("pay", governance.Irreversible)
	c.Args = json.RawMessage(`{"say":"yes"}`)
	out, err := run.Do(context.Background(), c, tl.fn)
	if err != nil || out.Decision.DecidedBy != "approver:web" || out.Decision.Reason != "clicked approve" {
		t.Fatalf("err %v decision %+v", err, out.Decision)
	}
	c.Args = json.RawMessage(`{"say":"no"}`)
	_, err = run.Do(context.Background(), c, tl.fn)
	if de := asDenied(t, err); !errors.Is(err, governance.ErrApprovalDenied) || de.DecidedBy != "approver:web" || de.Reason != "clicked deny" {
		t.Fatalf("err %v", err)
	}
	if tl.runs.Load() != 1 {
		t.Fatalf("runs %d", tl.runs.Load())
	}
}

func TestChanApproverAbsentUITimesOut(t *testing.T) {
	reqs := make(chan *governance.PendingApproval) // nobody reads
	g := mustGate(t, governance.GateConfig{
		Policy:          governance.PolicyFunc(needsApproval),
		Approver:        governance.ChanApprover{C: reqs},
		ApprovalTimeout: 20 * time.Millisecond,
	})
	if _, err := g.NewRun("r").Do(context.Background(), call("pay", governance.Irreversible), newTool().fn); !errors.Is(err, governance.ErrApprovalTimeout) {
		t.Fatalf("err = %v", err)
	}
	// A UI that picks the request up after the gate gave up cannot answer it.
	buffered := make(chan *governance.PendingApproval, 1)
	g = mustGate(t, governance.GateConfig{
		Policy:          governance.PolicyFunc(needsApproval),
		Approver:        governance.ChanApprover{C: buffered},
		ApprovalTimeout: 20 * time.Millisecond,
	})
	tl := newTool()
	g.NewRun("r").Do(context.Background(), call("pay", governance.Irreversible), tl.fn)
	p := <-buffered
	<-p.Done()
	if p.Allow("too late") || tl.runs.Load() != 0 {
		t.Fatal("a late answer was taken")
	}
}

func TestTerminalApproverNeverWritesToStdout(t *testing.T) {
	oldOut, oldErr := os.Stdout, os.Stderr
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	os.Stdout, os.Stderr = outW, errW
	ta := &governance.TerminalApprover{In: strings.NewReader("y\n")} // default Out
	d, err := ta.Approve(context.Background(), approvalRequest("send_email", `{}`))
	os.Stdout, os.Stderr = oldOut, oldErr
	outW.Close()
	errW.Close()
	stdout, _ := io.ReadAll(outR)
	stderr, _ := io.ReadAll(errR)
	if err != nil || !d.Allow {
		t.Fatalf("%+v %v", d, err)
	}
	if len(stdout) != 0 || !strings.Contains(string(stderr), "Approve? [y/N]") {
		t.Fatalf("stdout %q, stderr %q", stdout, stderr)
	}
}
