package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// The tests of this file are the hostile-client corpus of the server: each one is what a client of `wasmbox mcp`
// did to it, and each fails without the bound or behaviour it names.

// stdioPeer drives ServeStdio with raw lines.
type stdioPeer struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func newStdioPeer(t *testing.T, srv *SandboxServer) *stdioPeer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &stdioPeer{t: t, in: inW, out: bufio.NewReaderSize(outR, 1<<20), done: make(chan error, 1)}
	go func() { p.done <- srv.ServeStdio(context.Background(), inR, outW); outW.Close() }()
	t.Cleanup(func() { inW.Close() })
	return p
}

func (p *stdioPeer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// answer reads the next message the server writes.
func (p *stdioPeer) answer() map[string]any {
	p.t.Helper()
	type res struct {
		m   map[string]any
		err error
	}
	c := make(chan res, 1)
	go func() {
		line, err := p.out.ReadBytes('\n')
		var m map[string]any
		if err == nil {
			err = json.Unmarshal(line, &m)
		}
		c <- res{m, err}
	}()
	select {
	case r := <-c:
		if r.err != nil {
			p.t.Fatal(r.err)
		}
		return r.m
	case <-time.After(30 * time.Second):
		p.t.Fatal("no answer from the server")
		return nil
	}
}

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestHostileClientMalformedStdioLines: a malformed line used to end `wasmbox mcp` over stdio (exit 125) and
// every session with it. Each now gets a JSON-RPC error and the session carries on.
func TestHostileClientMalformedStdioLines(t *testing.T) {
	srv := NewServer(newSandbox(t, wasmbox.Config{}), ServerConfig{MaxRequestBytes: 64 << 10})
	defer srv.Close(context.Background())
	p := newStdioPeer(t, srv)
	p.send(initLine)
	if a := p.answer(); a["result"] == nil {
		t.Fatalf("initialize: %v", a)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, tc := range []struct {
		name, line string
		code       float64
		id         any
	}{
		{"bad JSON", `{"jsonrpc":"2.0","id":2,"method":`, -32700, nil},
		{"NUL byte", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\x00\"}", -32700, nil},
		{"deep array", strings.Repeat("[", 20000) + strings.Repeat("]", 20000), -32700, nil},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{"batch", `[{"jsonrpc":"2.0","id":4,"method":"ping"}]`, -32600, nil},
		{"not JSON-RPC", `{"hello":"world","id":5}`, -32600, float64(5)},
		{"over MaxRequestBytes", `{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`, -32600, nil},
	} {
		p.send(tc.line)
		a := p.answer()
		e, _ := a["error"].(map[string]any)
		if e == nil || e["code"] != tc.code || a["id"] != tc.id {
			t.Errorf("%s: answer %v, want error %v with id %v", tc.name, a, tc.code, tc.id)
		}
	}
	// The session is still there, and so is its state.
	p.send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"python_exec","arguments":{"code":"v = 41"}}}`)
	p.answer()
	p.send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"python_exec","arguments":{"code":"print(v + 1)"}}}`)
	a := p.answer()
	if a["id"] != float64(11) || !strings.Contains(fmt.Sprint(a["result"]), "42") {
		t.Fatalf("after the malformed lines: %v", a)
	}
	p.in.Close()
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("ServeStdio at end of input: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not end with its input")
	}
}

// TestHostileClientQueueFlood: calls queued in one session had no bound (150 concurrent 4 MiB run_python calls
// took the host to 1.7 GiB). Past MaxQueuedCalls waiting calls of a session, and past MaxPendingBytes of input of
// all calls, a call is refused at once with ErrBusy and nothing of it is kept.
func TestHostileClientQueueFlood(t *testing.T) {
	srv := NewServer(newSandbox(t, wasmbox.Config{Timeout: 20 * time.Second}),
		ServerConfig{MaxQueuedCalls: 2, MaxPendingBytes: 3 << 20})
	defer srv.Close(context.Background())
	cs := session(t, srv)
	ctx := context.Background()
	// One call runs for 3 s, so the others queue behind it.
	slow := `import time
t = time.monotonic()
while time.monotonic() - t < 3:
    pass
`
	var wg sync.WaitGroup
	var mu sync.Mutex
	var busy, ok int
	call := func(code string) {
		defer wg.Done()
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code}})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			t.Errorf("call: %v", err)
		case r.IsError && strings.Contains(fmt.Sprint(r.Content[0]), "server busy"):
			busy++
		case !r.IsError:
			ok++
		default:
			t.Errorf("unexpected error result: %v", r.Content[0])
		}
	}
	wg.Add(1)
	go call(slow)
	time.Sleep(300 * time.Millisecond) // the slow call holds the session's turn
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go call("pass  # " + strings.Repeat("x", 100<<10))
	}
	wg.Wait()
	if ok != 3 || busy != 18 {
		t.Errorf("1 running + 2 queued should succeed and 18 be refused; got %d ok, %d busy", ok, busy)
	}
	srv.mu.Lock()
	pending := srv.pending
	srv.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d bytes still counted as pending after every call ended", pending)
	}

	// Bytes: one call bigger than MaxPendingBytes is refused whatever the queue.
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "#" + strings.Repeat("x", 3<<20)}})
	if err != nil || !r.IsError || !strings.Contains(fmt.Sprint(r.Content[0]), "bytes of input") {
		t.Errorf("a call over MaxPendingBytes: %v %+v", err, r)
	}
	if !errors.Is(fmt.Errorf("%w", ErrBusy), ErrBusy) {
		t.Fatal("ErrBusy does not wrap")
	}
}

// TestHostileClientIdleSessions: HTTP sessions that never call a tool were unbounded (4,000 initialize requests
// kept for 15 minutes). Past MaxMCPSessions the least recently seen of them is closed; a real client still gets
// in, and sessions with state idle long enough make way for new ones instead of locking them out.
func TestHostileClientIdleSessions(t *testing.T) {
	srv := NewServer(newSandbox(t, wasmbox.Config{}), ServerConfig{MaxMCPSessions: 6, MaxSessions: 2, EvictIdleAfter: 200 * time.Millisecond})
	defer srv.Close(context.Background())
	hs := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(hs.Close) // after the clients' cleanups: their streams must end first
	for i := 0; i < 200; i++ {
		req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(initLine))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize %d: %s", i, resp.Status)
		}
	}
	n := 0
	for range srv.MCPServer().Sessions() {
		n++
	}
	if n > 6 {
		t.Errorf("%d MCP sessions kept, want at most MaxMCPSessions (6)", n)
	}
	ctx := context.Background()
	connect := func() *sdk.ClientSession {
		t.Helper()
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	var out RunOut
	a, b := connect(), connect()
	callJSON(t, a, "python_exec", map[string]any{"code": "v = 'a'"}, &out)
	callJSON(t, b, "python_exec", map[string]any{"code": "v = 'b'"}, &out)
	// Two sessions with state, both just used: a third waits its turn...
	c := connect()
	if e := callJSON(t, c, "python_exec", map[string]any{"code": "v = 'c'"}, &out); !strings.Contains(e, "too many sessions") {
		t.Fatalf("third session while both are busy-recent: %q", e)
	}
	// ...and once a's state has been idle for EvictIdleAfter, it takes a's place (b, used since, stays).
	time.Sleep(250 * time.Millisecond)
	callJSON(t, b, "python_exec", map[string]any{"code": "pass"}, &out)
	if e := callJSON(t, c, "python_exec", map[string]any{"code": "print('c')"}, &out); e != "" || out.Stdout != "c\n" {
		t.Fatalf("third session after a idled: %q %+v", e, out)
	}
	callJSON(t, b, "python_exec", map[string]any{"code": "print(v)"}, &out)
	if out.Stdout != "b\n" {
		t.Errorf("b lost its state: %+v", out)
	}
}
