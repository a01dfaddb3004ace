// Package agenttest provides a strict scripted model for testing code that drives an llms.Model, such as the
// agent package.
//
// Unlike langchaingo's fake LLM, which wraps around to its first reply and is not safe for concurrent use, the
// scripted Model replies in order, fails the test when it is asked for more replies than were scripted (and,
// at the end of the test, when some were never used), records every prompt it saw, and is safe for concurrent
// use.
//
// Here's an example:
//
//	model := agenttest.New(t,
//		"```python\nfinal_answer(1 + 1)\n```",
//	)
//	a, err := agent.New(ctx, model, wasmbox.Config{})
//	res, err := a.Run(ctx, "What is 1 + 1?")
//	// res.Answer == 2.0; model.Prompts()[0] holds the system prompt and the task.
package agenttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tmc/langchaingo/llms"
)

// ErrExhausted is returned when the model is asked for a reply it does not have.
var ErrExhausted = errors.New("agenttest: scripted model has no more replies")

// TB is the part of testing.TB the model uses; *testing.T, *testing.B and *testing.F satisfy it. Cleanup is
// used when the value has it.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Reply is one scripted reply: text, an error to return instead, or tool calls for function-calling tests.
type Reply struct {
	Text      string
	Err       error
	ToolCalls []llms.ToolCall
}

// Model is a scripted llms.Model.
type Model struct {
	tb      TB
	mu      sync.Mutex
	replies []Reply
	next    int
	prompts [][]llms.MessageContent
	options []llms.CallOptions
}

var _ llms.Model = (*Model)(nil)

// New returns a model that answers with replies, in order. tb may be nil (for example in a program's scripted
// mode): running out then only returns ErrExhausted. With a tb that has Cleanup (a *testing.T), the model
// also fails the test if some replies were never used.
func New(tb TB, replies ...string) *Model {
	rs := make([]Reply, len(replies))
	for i, r := range replies {
		rs[i] = Reply{Text: r}
	}
	return NewReplies(tb, rs...)
}

// NewReplies is New with full Reply values.
func NewReplies(tb TB, replies ...Reply) *Model {
	m := &Model{tb: tb, replies: append([]Reply(nil), replies...)}
	if c, ok := tb.(interface{ Cleanup(func()) }); ok {
		c.Cleanup(func() {
			if n := m.Remaining(); n > 0 {
				tb.Helper()
				tb.Errorf("agenttest: %d of %d scripted replies were never used", n, len(m.replies))
			}
		})
	}
	return m
}

// GenerateContent returns the next scripted reply and records the messages.
func (m *Model) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var opts llms.CallOptions
	for _, o := range options {
		o(&opts)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prompts = append(m.prompts, cloneMessages(messages))
	m.options = append(m.options, opts)
	if m.next >= len(m.replies) {
		err := fmt.Errorf("%w: call %d, %d scripted", ErrExhausted, len(m.prompts), len(m.replies))
		if m.tb != nil {
			m.tb.Helper()
			m.tb.Errorf("%v; the last message was:\n%s", err, lastText(messages))
		}
		return nil, err
	}
	r := m.replies[m.next]
	m.next++
	if r.Err != nil {
		return nil, r.Err
	}
	choice := &llms.ContentChoice{Content: r.Text, StopReason: "stop", ToolCalls: append([]llms.ToolCall(nil), r.ToolCalls...)}
	if len(r.ToolCalls) > 0 {
		choice.StopReason = "tool_calls"
		choice.FuncCall = r.ToolCalls[0].FunctionCall
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{choice}}, nil
}

// Call implements the deprecated text interface through GenerateContent.
func (m *Model) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// Prompts returns a copy of the messages of every call so far.
func (m *Model) Prompts() [][]llms.MessageContent {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([][]llms.MessageContent, len(m.prompts))
	for i, p := range m.prompts {
		out[i] = cloneMessages(p)
	}
	return out
}

// CallOptions returns the call options of every call so far.
func (m *Model) CallOptions() []llms.CallOptions {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llms.CallOptions(nil), m.options...)
}

// Calls returns how many times the model was asked.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.prompts)
}

// Remaining returns how many scripted replies are left.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.replies) - m.next
}

// LastMessage returns the text of the last message of the last call ("" before the first call): in an agent's
// conversation, the latest observation.
func (m *Model) LastMessage() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.prompts) == 0 {
		return ""
	}
	return lastText(m.prompts[len(m.prompts)-1])
}

// Text returns the text parts of a message, joined.
func Text(mc llms.MessageContent) string {
	var parts []string
	for _, p := range mc.Parts {
		if t, ok := p.(llms.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "")
}

func lastText(msgs []llms.MessageContent) string {
	if len(msgs) == 0 {
		return ""
	}
	return Text(msgs[len(msgs)-1])
}

func cloneMessages(msgs []llms.MessageContent) []llms.MessageContent {
	out := make([]llms.MessageContent, len(msgs))
	for i, m := range msgs {
		out[i] = llms.MessageContent{Role: m.Role, Parts: append([]llms.ContentPart(nil), m.Parts...)}
	}
	return out
}
