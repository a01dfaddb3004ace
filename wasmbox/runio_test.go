package wasmbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// blockedReader never returns from Read until released.
type blockedReader struct{ release chan struct{} }

func (r blockedReader) Read([]byte) (int, error) { <-r.release; return 0, io.EOF }

// forEngine runs f once per engine built into the test binary (wazero; the wasmtime module runs its own sandbox tests).
func forEngine(t *testing.T, f func(t *testing.T, engine string)) {
	for _, e := range wasmbox.Engines() {
		t.Run(e, func(t *testing.T) { f(t, e) })
	}
}

// A read of stdin honours the run's deadline: a Reader that never returns does not hold the run (read(),
// os.read, select) nor Close.
func TestStdinHonoursDeadline(t *testing.T) {
	forEngine(t, func(t *testing.T, engine string) {
		sb, err := wasmbox.New(context.Background(), wasmbox.Config{Engine: engine, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		blocked := blockedReader{release: make(chan struct{})}
		defer close(blocked.release)
		for _, code := range []string{
			"import sys\nsys.stdin.read()",
			"import os\nos.read(0, 1)",
			"import select, sys\nselect.select([sys.stdin], [], [])\nsys.stdin.read()",
		} {
			start := time.Now()
			res, err := sb.RunProgram(context.Background(), wasmbox.Program{Code: code, Stdin: blocked})
			if !errors.Is(err, wasmbox.ErrTimeout) {
				t.Errorf("%q: err %v, want ErrTimeout", code, err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%q: ran %v under a 1 s timeout", code, d)
			}
			if res != nil && res.ExitCode != -1 {
				t.Errorf("%q: exit %d", code, res.ExitCode)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sb.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}

// Stdin still delivers what the caller writes, as it is written, and stops at StdinLimit.
func TestStdinDataAndLimit(t *testing.T) {
	forEngine(t, func(t *testing.T, engine string) {
		sb := newSandbox(t, wasmbox.Config{Engine: engine, StdinLimit: 1000})
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte("hello\n"))
			time.Sleep(50 * time.Millisecond)
			pw.Write([]byte("world\n"))
			pw.Close()
		}()
		res, err := sb.RunProgram(context.Background(), wasmbox.Program{Code: "import sys\nprint(sys.stdin.read().split())", Stdin: pr})
		if err != nil || res.Stdout != "['hello', 'world']\n" {
			t.Fatalf("stdout %q err %v", res.Stdout, err)
		}
		res, err = sb.RunProgram(context.Background(), wasmbox.Program{Code: "import sys\nprint(len(sys.stdin.buffer.read()))",
			Stdin: strings.NewReader(strings.Repeat("z", 5000))})
		if err != nil || res.Stdout != "1000\n" {
			t.Fatalf("read past StdinLimit: stdout %q err %v", res.Stdout, err)
		}
	})
}

// select() with a timeout on a stdin with no data waits for the timeout and reports it not ready; with data it
// reports it ready.
func TestStdinSelectTimeout(t *testing.T) {
	forEngine(t, func(t *testing.T, engine string) {
		sb := newSandbox(t, wasmbox.Config{Engine: engine, Timeout: 5 * time.Second})
		blocked := blockedReader{release: make(chan struct{})}
		defer close(blocked.release)
		code := "import select, sys\nr, _, _ = select.select([sys.stdin], [], [], 0.2)\nprint(len(r))"
		res, err := sb.RunProgram(context.Background(), wasmbox.Program{Stdin: blocked, Code: code})
		if err != nil || res.Stdout != "0\n" {
			t.Fatalf("no data: stdout %q err %v", res.Stdout, err)
		}
		res, err = sb.RunProgram(context.Background(), wasmbox.Program{Stdin: strings.NewReader("x"), Code: code})
		if err != nil || res.Stdout != "1\n" {
			t.Fatalf("data: stdout %q err %v", res.Stdout, err)
		}
	})
}

// A tool that runs code in its own Session or Sandbox gets ErrReentrant instead of a deadlock, and Close does not
// hang afterwards. Alive is false once the Sandbox is closed.
func TestReentrantExecRefused(t *testing.T) {
	var se *wasmbox.Session
	var sb *wasmbox.Sandbox
	var mu sync.Mutex
	var errs []error
	tool := func(name string, f func(ctx context.Context) error) hostfuncs.Tool {
		return hostfuncs.Tool{Name: name, Effect: governance.ReadOnly,
			Handler: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				err := f(ctx)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return json.RawMessage(`"done"`), nil
			}}
	}
	reg := hostfuncs.NewRegistry().MustRegister(
		tool("exec_self", func(ctx context.Context) error { _, err := se.Exec(ctx, "print(1)"); return err }),
		tool("run_self", func(ctx context.Context) error { _, err := sb.Run(ctx, "print(1)"); return err }),
		tool("session_self", func(ctx context.Context) error { _, err := sb.NewSession(ctx, nil); return err }),
	)
	var err error
	sb, err = wasmbox.New(context.Background(), wasmbox.Config{Tools: reg, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if se, err = sb.NewSession(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err := se.Exec(ctx, "import tools\nprint(tools.exec_self(), tools.run_self(), tools.session_self())")
	if err != nil || res.Stdout != "done done done\n" {
		t.Fatalf("stdout %q err %v", res.Stdout, err)
	}
	if len(errs) != 3 {
		t.Fatalf("errors %v", errs)
	}
	for _, e := range errs {
		if !errors.Is(e, wasmbox.ErrReentrant) {
			t.Errorf("re-entrant call: %v, want ErrReentrant", e)
		}
	}
	if !se.Alive() {
		t.Fatal("session not alive")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sb.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if se.Alive() {
		t.Error("Session.Alive after Sandbox.Close")
	}
	if err := se.Close(cctx); err != nil {
		t.Fatal(err)
	}
}

// The streaming writer receives exactly what is captured: nothing past the cap.
func TestStreamStopsAtCap(t *testing.T) {
	var stream bytes.Buffer
	sb := newSandbox(t, wasmbox.Config{StdoutLimit: 100})
	res, err := sb.RunProgram(context.Background(), wasmbox.Program{Code: "print('x' * 1000)\nprint('y' * 10)", Stdout: &stream})
	if err != nil || !res.StdoutTruncated {
		t.Fatalf("err %v truncated %v", err, res.StdoutTruncated)
	}
	if stream.Len() != 100 || !strings.HasPrefix(res.Stdout, stream.String()) {
		t.Fatalf("stream got %d bytes, want the 100 captured", stream.Len())
	}
}

// os.environ changed by one Exec of a Session does not reach the next: every Exec starts from Config.Env.
func TestSessionEnvironmentReset(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Env: map[string]string{"KEEP": "1"}})
	ctx := context.Background()
	se, err := sb.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close(ctx)
	if _, err := se.Exec(ctx, "import os\nos.environ['LEAK'] = 'x'\ndel os.environ['KEEP']\nos.environ['HOME'] = '/elsewhere'\nv = 5"); err != nil {
		t.Fatal(err)
	}
	res, err := se.Exec(ctx, "import os\nprint(os.environ.get('LEAK'), os.environ.get('KEEP'), os.environ['HOME'], v)")
	if err != nil || res.Stdout != "None 1 /workspace 5\n" {
		t.Fatalf("stdout %q err %v (globals persist, the environment does not)", res.Stdout, err)
	}
}

// Config.Timeout is wall-clock time with tools included: a tool that sleeps 6 s ignoring its context, under a 2 s
// timeout, ends the run with ErrTimeout within the grace, and its late result never reaches the program.
func TestToolTimeCountsAgainstTimeout(t *testing.T) {
	slow := hostfuncs.Tool{Name: "slow", Effect: governance.ReadOnly,
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			time.Sleep(6 * time.Second)
			return json.RawMessage(`"LATE"`), nil
		}}
	forEngine(t, func(t *testing.T, engine string) { testToolTime(t, engine, slow) })
}

func testToolTime(t *testing.T, engine string, slow hostfuncs.Tool) {
	sb := newSandbox(t, wasmbox.Config{Engine: engine, Tools: hostfuncs.NewRegistry().MustRegister(slow), Timeout: 2 * time.Second})
	start := time.Now()
	res, err := sb.Run(context.Background(), "import tools\nprint(tools.slow())\nprint('after')")
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("Run returned after %v under a 2 s timeout", d)
	}
	if !errors.Is(err, wasmbox.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want ErrTimeout", err)
	}
	if strings.Contains(res.Stdout, "LATE") || strings.Contains(res.Stdout, "after") || res.ToolCallsCompleted != 0 {
		t.Fatalf("the late result reached the program: stdout %q completed %d", res.Stdout, res.ToolCallsCompleted)
	}
	if res.ExitCode != -1 {
		t.Errorf("exit %d, want -1", res.ExitCode)
	}
}

// A human's approval time does not count against the program's time: under a 1 s timeout, a call whose approval
// takes 1.5 s still completes.
func TestApprovalPausesTheDeadline(t *testing.T) {
	reg, _, refunds := toolSet(t)
	approver := governance.ApproverFunc(func(ctx context.Context, req governance.ApprovalRequest) (governance.Decision, error) {
		select {
		case <-time.After(1500 * time.Millisecond):
			return governance.Decision{Allow: true, Reason: "ok"}, nil
		case <-ctx.Done():
			return governance.Decision{}, ctx.Err()
		}
	})
	g, _ := gate(t, governance.GateConfig{Approver: approver, ApprovalTimeout: 10 * time.Second})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g, Timeout: time.Second})
	res, err := sb.Run(context.Background(), "import tools\nprint(tools.issue_refund('A-1', 5.0))")
	if err != nil || res.Stdout != "True\n" || refunds.Load() != 1 || res.ToolCallsCompleted != 1 {
		t.Fatalf("stdout %q err %v refunds %d completed %d", res.Stdout, err, refunds.Load(), res.ToolCallsCompleted)
	}
	// The clock runs again after the approval: the program's own time is still bounded.
	res, err = sb.Run(context.Background(), "import tools\ntools.issue_refund('A-2', 5.0)\nwhile True: pass")
	if !errors.Is(err, wasmbox.ErrTimeout) || res.Duration > 4*time.Second {
		t.Fatalf("err %v after %v, want ErrTimeout about 2.5 s in", err, res.Duration)
	}
}

// timedWriter records when each write arrived.
type timedWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first map[string]time.Time
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for _, line := range strings.Split(w.buf.String(), "\n") {
		if _, ok := w.first[line]; !ok && line != "" {
			w.first[line] = time.Now()
		}
	}
	return len(p), nil
}

// print() reaches a streaming writer as it is printed, not at the end of the run.
func TestPrintStreamsLineByLine(t *testing.T) {
	w := &timedWriter{first: map[string]time.Time{}}
	sb := newSandbox(t, wasmbox.Config{Timeout: 10 * time.Second})
	res, err := sb.RunProgram(context.Background(), wasmbox.Program{Code: "import time\nprint('first')\ntime.sleep(1.5)\nprint('second')", Stdout: w})
	end := time.Now()
	if err != nil || res.Stdout != "first\nsecond\n" {
		t.Fatalf("stdout %q err %v", res.Stdout, err)
	}
	w.mu.Lock()
	got, ok := w.first["first"]
	w.mu.Unlock()
	if !ok || end.Sub(got) < time.Second {
		t.Fatalf("'first' reached the stream %v before the end of a run that slept 1.5 s after printing it", end.Sub(got))
	}
}

// Output printed before a kill is kept, and the Result says how many tool calls completed.
func TestOutputBeforeKillKept(t *testing.T) {
	reg, _, _ := toolSet(t)
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Timeout: 300 * time.Millisecond})
	res, err := sb.Run(context.Background(), `import tools
for i in range(3):
    tools.get_order("A-%d" % i)
try:
    tools.issue_refund("A-1", 1.0)
except tools.ToolDenied:
    pass
print("before")
try:
    while True:
        pass
except KeyboardInterrupt:
    while True:
        pass`)
	if !errors.Is(err, wasmbox.ErrTimeout) {
		t.Fatalf("err %v", err)
	}
	if res.Stdout != "before\n" {
		t.Errorf("stdout %q, want what was printed before the kill", res.Stdout)
	}
	if res.ToolCallsCompleted != 3 || len(res.ToolCalls) != 4 {
		t.Errorf("completed %d of %d calls, want 3 of 4", res.ToolCallsCompleted, len(res.ToolCalls))
	}
}
