package agenttest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tmc/langchaingo/llms"

	"github.com/wasmbox/wasmbox/agent/agenttest"
)

// recorder is a TB that records failures instead of failing.
type recorder struct {
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) finish() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func ask(m llms.Model, text string) (string, error) {
	return llms.GenerateFromSinglePrompt(context.Background(), m, text)
}

func TestRepliesInOrderAndRecordsPrompts(t *testing.T) {
	m := agenttest.New(t, "one", "two")
	for _, want := range []string{"one", "two"} {
		got, err := ask(m, "q-"+want)
		if err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	p := m.Prompts()
	if len(p) != 2 || agenttest.Text(p[1][0]) != "q-two" || m.LastMessage() != "q-two" || m.Remaining() != 0 || m.Calls() != 2 {
		t.Errorf("prompts %v", p)
	}
	// The record is a copy: changing what was passed in does not change it.
	msgs := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "original")}
	m2 := agenttest.New(t, "ok")
	_, _ = m2.GenerateContent(context.Background(), msgs)
	msgs[0].Parts[0] = llms.TextPart("changed")
	if got := agenttest.Text(m2.Prompts()[0][0]); got != "original" {
		t.Errorf("recorded %q", got)
	}
}

func TestFailsWhenExhausted(t *testing.T) {
	r := &recorder{}
	m := agenttest.New(r, "only")
	if _, err := ask(m, "first"); err != nil {
		t.Fatal(err)
	}
	_, err := ask(m, "second")
	if !errors.Is(err, agenttest.ErrExhausted) {
		t.Fatalf("error %v", err)
	}
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "no more replies") || !strings.Contains(r.errors[0], "second") {
		t.Errorf("failures %q", r.errors)
	}
	// Without a TB it only returns the error.
	if _, err := ask(agenttest.New(nil), "x"); !errors.Is(err, agenttest.ErrExhausted) {
		t.Errorf("error %v", err)
	}
}

func TestFailsWhenRepliesUnused(t *testing.T) {
	r := &recorder{}
	m := agenttest.New(r, "a", "b")
	_, _ = ask(m, "q")
	r.finish()
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "1 of 2 scripted replies were never used") {
		t.Errorf("failures %q", r.errors)
	}
}

func TestScriptedErrorsAndToolCalls(t *testing.T) {
	boom := errors.New("boom")
	m := agenttest.NewReplies(t,
		agenttest.Reply{Err: boom},
		agenttest.Reply{ToolCalls: []llms.ToolCall{{ID: "1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "execute", Arguments: "{}"}}}},
	)
	if _, err := ask(m, "q"); !errors.Is(err, boom) {
		t.Errorf("error %v", err)
	}
	resp, err := m.GenerateContent(context.Background(), nil, llms.WithTemperature(0.5))
	if err != nil || resp.Choices[0].ToolCalls[0].FunctionCall.Name != "execute" || resp.Choices[0].FuncCall == nil {
		t.Errorf("response %+v, %v", resp, err)
	}
	if o := m.CallOptions(); len(o) != 2 || o[1].Temperature != 0.5 {
		t.Errorf("options %+v", o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := agenttest.New(nil, "x").GenerateContent(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// Safe for concurrent use: every reply is handed out exactly once (run with -race).
func TestConcurrent(t *testing.T) {
	const n = 64
	replies := make([]string, n)
	for i := range replies {
		replies[i] = fmt.Sprint(i)
	}
	m := agenttest.New(t, replies...)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := ask(m, "q")
			if err != nil {
				t.Error(err)
			}
			_ = m.Prompts()
			mu.Lock()
			seen[got] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d distinct replies, want %d", len(seen), n)
	}
}
