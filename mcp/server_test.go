package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmbox/wasmbox/wasmbox"
)

func newSandbox(t *testing.T, cfg wasmbox.Config) *wasmbox.Sandbox {
	t.Helper()
	sb, err := wasmbox.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

// session connects one MCP client session to srv over in-memory transports.
func session(t *testing.T, srv *SandboxServer) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	if _, err := srv.MCPServer().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callJSON calls a tool and decodes its structured result into out; it returns the result's error text.
func callJSON(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any, out any) string {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if r.IsError {
		var texts []string
		for _, c := range r.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v: %s", tool, err, b)
	}
	return ""
}

func TestServerTools(t *testing.T) {
	srv := NewServer(newSandbox(t, wasmbox.Config{Timeout: 5 * time.Second}), ServerConfig{MaxFileBytes: 1000, MaxListEntries: 3})
	defer srv.Close(context.Background())
	cs := session(t, srv)

	var out RunOut
	if e := callJSON(t, cs, "run_python", map[string]any{"code": "import sys\nprint('hi')\nprint('err', file=sys.stderr)\nopen('a.txt','w').write('A')\n1/0"}, &out); e != "" {
		t.Fatal(e)
	}
	if out.Stdout != "hi\n" || out.Stderr == "" || out.Exception == nil || out.Exception.Type != "ZeroDivisionError" || out.ExitCode != 1 {
		t.Errorf("run_python: %+v", out)
	}
	if len(out.FilesChanged) != 1 || out.FilesChanged[0].Path != "a.txt" {
		t.Errorf("files changed: %+v", out.FilesChanged)
	}
	// The session's workspace persists across runs; globals do not (run_python), do (python_exec).
	callJSON(t, cs, "run_python", map[string]any{"code": "x = 1\nprint(open('a.txt').read())"}, &out)
	if out.Stdout != "A\n" {
		t.Errorf("workspace not kept: %+v", out)
	}
	callJSON(t, cs, "run_python", map[string]any{"code": "print('x' in globals())"}, &out)
	if out.Stdout != "False\n" {
		t.Errorf("run_python kept globals: %+v", out)
	}
	callJSON(t, cs, "python_exec", map[string]any{"code": "y = 41"}, &out)
	callJSON(t, cs, "python_exec", map[string]any{"code": "print(y + 1, open('a.txt').read())"}, &out)
	if out.Stdout != "42 A\n" {
		t.Errorf("python_exec: %+v", out)
	}
	// A timeout is reported in the output, not as a protocol failure.
	callJSON(t, cs, "run_python", map[string]any{"code": "while True: pass"}, &out)
	if out.Error == "" || out.ExitCode != -1 {
		t.Errorf("timeout: %+v", out)
	}

	var w WriteOut
	if e := callJSON(t, cs, "write_file", map[string]any{"path": "d/b.txt", "content": "bee"}, &w); e != "" || w.Size != 3 {
		t.Fatalf("write_file: %s %+v", e, w)
	}
	var f FileOut
	if e := callJSON(t, cs, "read_file", map[string]any{"path": "d/b.txt"}, &f); e != "" || f.Content != "bee" {
		t.Fatalf("read_file: %s %+v", e, f)
	}
	if e := callJSON(t, cs, "write_file", map[string]any{"path": "big", "content": strings.Repeat("x", 1001)}, &w); !strings.Contains(e, "at most 1000") {
		t.Errorf("write past MaxFileBytes: %q", e)
	}
	callJSON(t, cs, "run_python", map[string]any{"code": "open('big','w').write('x'*5000)\nopen('bin','wb').write(bytes([255,0]))"}, &out)
	if e := callJSON(t, cs, "read_file", map[string]any{"path": "big"}, &f); !strings.Contains(e, "at most 1000") {
		t.Errorf("read past MaxFileBytes: %q", e)
	}
	var bin FileOut
	if e := callJSON(t, cs, "read_file", map[string]any{"path": "bin"}, &bin); e != "" || !bin.Binary || bin.Content != "" || bin.Size != 2 {
		t.Errorf("binary: %s %+v", e, bin)
	}
	var l ListOut
	callJSON(t, cs, "list_files", map[string]any{}, &l)
	if len(l.Files) != 3 || l.Total < 5 {
		t.Errorf("list_files: %+v", l)
	}
}

func TestServerSessionsAreBoundedAndEndWithTheirMCPSession(t *testing.T) {
	srv := NewServer(newSandbox(t, wasmbox.Config{}), ServerConfig{MaxSessions: 2})
	defer srv.Close(context.Background())
	a, b, c := session(t, srv), session(t, srv), session(t, srv)
	var out RunOut
	callJSON(t, a, "python_exec", map[string]any{"code": "v = 'a'"}, &out)
	callJSON(t, b, "python_exec", map[string]any{"code": "v = 'b'"}, &out)
	if e := callJSON(t, c, "run_python", map[string]any{"code": "print(1)"}, &out); !strings.Contains(e, "too many sessions") {
		t.Fatalf("third session: %q", e)
	}
	// Sessions do not see each other.
	callJSON(t, a, "python_exec", map[string]any{"code": "print(v)"}, &out)
	if out.Stdout != "a\n" {
		t.Errorf("session a sees %q", out.Stdout)
	}
	// Closing an MCP session frees its state; the waiting one then gets a place.
	a.Close()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Sessions() > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if e := callJSON(t, c, "run_python", map[string]any{"code": "print(1)"}, &out); e != "" || out.Stdout != "1\n" {
		t.Fatalf("after a closed: %q %+v", e, out)
	}
}

func TestServerIdleTimeout(t *testing.T) {
	srv := NewServer(newSandbox(t, wasmbox.Config{}), ServerConfig{IdleTimeout: 300 * time.Millisecond})
	defer srv.Close(context.Background())
	cs := session(t, srv)
	var out RunOut
	callJSON(t, cs, "python_exec", map[string]any{"code": "v = 1"}, &out)
	if srv.Sessions() != 1 {
		t.Fatal("no session state")
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.Sessions() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if srv.Sessions() != 0 {
		t.Fatal("idle session state not dropped")
	}
	callJSON(t, cs, "python_exec", map[string]any{"code": "print('v' in globals())"}, &out)
	if out.Stdout != "False\n" {
		t.Errorf("after idling out: %+v", out)
	}
}
