package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// TestMain doubles as a scripted stdio MCP server (WASMBOX_MCP_TEST_SERVER=1) for the crash and lifecycle tests:
// a real child process that the client starts, kills and restarts.
func TestMain(m *testing.M) {
	if os.Getenv("WASMBOX_MCP_TEST_SERVER") == "1" {
		testServerMain()
		return
	}
	os.Exit(m.Run())
}

func testServerMain() {
	if msg := os.Getenv("WASMBOX_MCP_TEST_FAIL"); msg != "" {
		fmt.Fprintln(os.Stderr, strings.Repeat("noise ", 2000)) // only the end of stderr is kept
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
	if f := os.Getenv("WASMBOX_MCP_TEST_PIDFILE"); f != "" {
		_ = os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	if f := os.Getenv("WASMBOX_MCP_TEST_DESCENDANT"); f != "" {
		// A long-lived process of the server's own that holds the server's stderr open, as a launcher's
		// node process or a script's background job would.
		d := exec.Command("sleep", "300")
		d.Stderr = os.Stderr
		if err := d.Start(); err == nil {
			_ = os.WriteFile(f, []byte(strconv.Itoa(d.Process.Pid)), 0o644)
		}
	}
	if f := os.Getenv("WASMBOX_MCP_TEST_SETSID"); f != "" {
		// A descendant that leaves the server's process group and session, as a daemonizing helper would.
		d := exec.Command("setsid", "sleep", "300")
		if err := d.Start(); err == nil {
			_ = os.WriteFile(f, []byte(strconv.Itoa(d.Process.Pid)), 0o644)
		}
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "scripted", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	s.AddTool(&sdk.Tool{Name: "echo", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)}, InputSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: a.Text}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "crash", InputSchema: obj}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		os.Exit(3) // the process dies in the middle of the call
		return nil, nil
	})
	s.AddTool(&sdk.Tool{Name: "hang", InputSchema: obj}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		select {} // never answers, ignores cancellation
	})
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

func selfServer(t *testing.T, pidfile string) Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "WASMBOX_MCP_TEST_SERVER=1", "WASMBOX_MCP_TEST_PIDFILE="+pidfile)
	return Server{Name: "scripted", Command: []string{exe}, Env: env}
}

// inMemory connects a Client to s over the SDK's in-memory transports.
func inMemory(t *testing.T, s *sdk.Server, cfg Config) (*Client, error) {
	t.Helper()
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c, err := Connect(ctx, Server{Name: "mem", Transport: ct}, cfg)
	if c != nil {
		t.Cleanup(func() { c.Close(context.Background()) })
	}
	return c, err
}

func boolp(b bool) *bool { return &b }

// gatedSandbox is a Sandbox whose tools are c's, behind a gate made from gcfg; it is closed with the test.
func gatedSandbox(t *testing.T, gcfg governance.GateConfig, c *Client) *wasmbox.Sandbox {
	t.Helper()
	gate, err := governance.NewGate(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := wasmbox.Config{Gate: gate}
	if err := Attach(&cfg, c); err != nil {
		t.Fatal(err)
	}
	sb, err := wasmbox.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

// mappingServer has one tool for each mapping rule.
func mappingServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mapping", Version: "1"}, nil)
	num := map[string]any{"type": "number", "description": "a number"}
	s.AddTool(&sdk.Tool{Name: "get-sum", Description: "Returns the sum of two numbers",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)},
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"a": num, "b": num}, "required": []string{"a", "b"}},
	}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var a struct{ A, B float64 }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return &sdk.CallToolResult{StructuredContent: map[string]any{"sum": a.A + a.B},
			Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(a.A + a.B)}}}, nil
	})
	// get_sum collides with get-sum's identifier: the name that already is one keeps it.
	s.AddTool(&sdk.Tool{Name: "get_sum", Description: "Another sum.", Annotations: &sdk.ToolAnnotations{DestructiveHint: boolp(false), OpenWorldHint: boolp(false)},
		InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "other"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "class", Description: "A keyword.", Annotations: &sdk.ToolAnnotations{},
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"user-id": map[string]any{"type": "string"}}, "required": []string{"user-id"}}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fetch", Description: "Reads a URL: read-only, but open world.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(true)}, InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "fetched"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "media", Description: "Text, an image and a resource link.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			size := int64(99)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello"},
				&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)},
				&sdk.ResourceLink{URI: "file:///x.txt", Name: "x", MIMEType: "text/plain", Size: &size}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fails", Description: "Always an error result.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)}, InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "disk on fire"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "protocol-error", Description: "A JSON-RPC error.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)}, InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, &jsonrpcError{}
		})
	s.AddTool(&sdk.Tool{Name: "nothing", Description: "No content.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)}, InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{}}, nil
		})
	return s
}

type jsonrpcError struct{}

func (*jsonrpcError) Error() string { return "database unreachable" }

func byName(c *Client) map[string]hostfuncs.Tool {
	m := map[string]hostfuncs.Tool{}
	for _, t := range c.Tools() {
		m[t.Name] = t
	}
	return m
}

func TestMappingRules(t *testing.T) {
	// By default the server's annotations decide nothing: every tool is unspecified (needs approval) and the
	// hints are only told in the description.
	untrusted, err := inMemory(t, mappingServer(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range untrusted.Tools() {
		if tool.Effect != governance.EffectUnspecified {
			t.Errorf("without TrustAnnotations %s: effect %v, want unspecified", tool.Name, tool.Effect)
		}
	}
	if d := byName(untrusted)["get_sum_2"].Description; !strings.Contains(d, "describes it as read-only, closed world; unchecked") {
		t.Errorf("description does not show the hints as information: %q", d)
	}
	c, err := inMemory(t, mappingServer(), Config{TrustAnnotations: true})
	if err != nil {
		t.Fatal(err)
	}
	tools := byName(c)
	want := map[string]governance.Effect{
		"get_sum_2": governance.ReadOnly,     // get-sum: readOnlyHint, openWorldHint false
		"get_sum":   governance.Mutating,     // destructiveHint false, openWorldHint false
		"class_":    governance.Irreversible, // annotations without hints: open world and destructive by default
		"fetch":     governance.Irreversible, // readOnlyHint, but openWorldHint true
		"media":     governance.EffectUnspecified,
		"fails":     governance.ReadOnly, "protocol_error": governance.ReadOnly, "nothing": governance.ReadOnly,
	}
	if len(tools) != len(want) {
		t.Fatalf("tools %v, want %d", tools, len(want))
	}
	for n, eff := range want {
		tool, ok := tools[n]
		if !ok {
			t.Fatalf("no tool %s in %v", n, c.Tools())
		}
		if tool.Effect != eff {
			t.Errorf("%s: effect %v, want %v", n, tool.Effect, eff)
		}
	}
	if !strings.Contains(tools["get_sum_2"].Description, `MCP tool "get-sum"`) {
		t.Errorf("description does not name the MCP tool: %q", tools["get_sum_2"].Description)
	}
	// Deterministic: the same tools in any listing order get the same names.
	c2, err := inMemory(t, mappingServer(), Config{TrustAnnotations: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, tool := range c2.Tools() {
		if c.Tools()[i].Name != tool.Name {
			t.Fatalf("names differ between connections: %s vs %s", c.Tools()[i].Name, tool.Name)
		}
	}
	reg := hostfuncs.NewRegistry()
	cfg := wasmbox.Config{Tools: reg}
	if err := Attach(&cfg, c); err != nil {
		t.Fatal(err)
	}
	stubs := reg.Stubs()
	for _, s := range []string{"def get_sum_2(a: float, b: float) -> \"Any\"", "Returns the sum of two numbers", "a (float): a number", "def class_(user_id: str)"} {
		if !strings.Contains(stubs, s) {
			t.Errorf("stubs lack %q:\n%s", s, stubs)
		}
	}
}

func TestIdentifier(t *testing.T) {
	for in, want := range map[string]string{"get-sum": "get_sum", "class": "class_", "1st": "t_1st", "": "t_",
		"_private": "private", "héllo": "h_llo", "call": "call_", "list_tools": "list_tools_",
		strings.Repeat("x", 200): strings.Repeat("x", 64)} {
		if got := Identifier("", in); got != want {
			t.Errorf("Identifier(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Identifier("gh", "search-code"); got != "gh_search_code" {
		t.Errorf("prefix: %q", got)
	}
}

// TestThroughTheGate runs a real program against the mapped tools: results become Python values, errors
// become ToolError, and the Gate decides (an unannotated tool is irreversible and needs approval, which the
// default gate refuses).
func TestThroughTheGate(t *testing.T) {
	ctx := context.Background()
	c, err := inMemory(t, mappingServer(), Config{TrustAnnotations: true})
	if err != nil {
		t.Fatal(err)
	}
	audit := &governance.MemoryAuditor{}
	gcfg := wasmbox.DefaultGateConfig()
	gcfg.Auditor = audit
	sb := gatedSandbox(t, gcfg, c)
	res, err := sb.Run(ctx, `import tools
r = tools.get_sum_2(1, 2.5)
print(type(r).__name__, r)
print(repr(tools.get_sum()))
print(repr(tools.nothing()))
for f in (tools.fails, tools.protocol_error):
    try:
        f()
    except tools.ToolError as e:
        print(type(e).__name__, e)
try:
    tools.media()
except tools.ToolDenied as e:
    print("denied", type(e).__name__)
`)
	if err != nil {
		t.Fatal(err, res.Stderr)
	}
	want := "dict {'sum': 3.5}\n'other'\nNone\nToolError mcp: tool error: fails: disk on fire\nToolError mcp: tool error: protocol-error on \"mem\": calling \"tools/call\": database unreachable\ndenied ApprovalDenied\n"
	if res.Stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %s", res.Stdout, want, res.Stderr)
	}
	if n := len(res.ToolCalls); n != 6 {
		t.Errorf("%d tool calls recorded, want 6", n)
	}
	var denied int
	for _, r := range audit.Records() {
		if r.Tool == "media" && r.Outcome == governance.StatusDenied {
			denied++
		}
	}
	if denied != 1 {
		t.Errorf("audit: %d denied records of media, want 1: %+v", denied, audit.Records())
	}

	// With approval, the other content kinds are described, not passed.
	gcfg.Approver = governance.AllowAll{}
	gate2, _ := governance.NewGate(gcfg)
	c2, err := inMemory(t, mappingServer(), Config{TrustAnnotations: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg2 := wasmbox.Config{Gate: gate2}
	if err := Attach(&cfg2, c2); err != nil {
		t.Fatal(err)
	}
	sb2, err := wasmbox.New(ctx, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Close(ctx)
	res, err = sb2.Run(ctx, "import tools\nprint(tools.media())\nprint(tools.class_('u1'))")
	if err != nil {
		t.Fatal(err, res.Stderr)
	}
	want = "['hello', {'mime_type': 'image/png', 'size': 1234, 'type': 'image'}, {'mime_type': 'text/plain', 'name': 'x', 'size': 99, 'type': 'resource_link', 'uri': 'file:///x.txt'}]\n{\"user-id\":\"u1\"}\n"
	if res.Stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %s", res.Stdout, want, res.Stderr)
	}
}

// TestHostileServer: everything the server chooses is bounded.
func TestHostileServer(t *testing.T) {
	ctx := context.Background()
	t.Run("100000 tools", func(t *testing.T) {
		// The server answers tools/list with 10^5 tools in one page (a middleware: registering them one by one
		// in the SDK's server would take most of the test's time).
		s := sdk.NewServer(&sdk.Implementation{Name: "many", Version: "1"}, nil)
		many := make([]*sdk.Tool, 100_000)
		for i := range many {
			many[i] = &sdk.Tool{Name: fmt.Sprintf("t%d", i), InputSchema: map[string]any{"type": "object"}}
		}
		s.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
			return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
				if method == "tools/list" {
					return &sdk.ListToolsResult{Tools: many}, nil
				}
				return next(ctx, method, req)
			}
		})
		start := time.Now()
		_, err := inMemory(t, s, Config{})
		if !errors.Is(err, ErrBound) || !strings.Contains(err.Error(), "more than 512 tools") {
			t.Fatalf("err = %v, want ErrBound naming the limit", err)
		}
		t.Logf("refused in %v", time.Since(start))
	})
	t.Run("huge schema, long name, bad parameter", func(t *testing.T) {
		s := sdk.NewServer(&sdk.Implementation{Name: "odd", Version: "1"}, nil)
		props := map[string]any{}
		for i := range 5000 {
			props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string", "description": strings.Repeat("d", 20)}
		}
		h := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return nil, nil }
		s.AddTool(&sdk.Tool{Name: "huge", InputSchema: map[string]any{"type": "object", "properties": props}}, h)
		s.AddTool(&sdk.Tool{Name: strings.Repeat("n", 500), InputSchema: map[string]any{"type": "object"}}, h)
		s.AddTool(&sdk.Tool{Name: "fine", InputSchema: map[string]any{"type": "object"}}, h)
		c, err := inMemory(t, s, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(c.Tools()); n != 1 || c.Tools()[0].Name != "fine" {
			t.Errorf("tools: %v", c.Tools())
		}
		sk := strings.Join(c.Skipped(), "\n")
		if !strings.Contains(sk, `"huge": input schema of`) || !strings.Contains(sk, "a name of 500 bytes") {
			t.Errorf("skipped: %s", sk)
		}
	})
	t.Run("giant result", func(t *testing.T) {
		s := sdk.NewServer(&sdk.Implementation{Name: "big", Version: "1"}, nil)
		s.AddTool(&sdk.Tool{Name: "big", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("x", 3<<20)}}}, nil
			})
		c, err := inMemory(t, s, Config{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Tools()[0].Handler(ctx, json.RawMessage(`{}`))
		if !errors.Is(err, ErrBound) || !strings.Contains(err.Error(), "Config.MaxResultBytes") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("collisions", func(t *testing.T) {
		s := sdk.NewServer(&sdk.Implementation{Name: "clash", Version: "1"}, nil)
		h := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return nil, nil }
		for _, n := range []string{"a.b", "a-b", "a_b", "a b", "a/b"} {
			s.AddTool(&sdk.Tool{Name: n, InputSchema: map[string]any{"type": "object"}}, h)
		}
		c, err := inMemory(t, s, Config{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range c.Tools() {
			names = append(names, tool.Name)
		}
		// sorted by MCP name: "a b" < "a-b" < "a.b" < "a/b" < "a_b"; a_b keeps its own name.
		if got := strings.Join(names, ","); got != "a_b_2,a_b_3,a_b_4,a_b_5,a_b" {
			t.Errorf("names %s", got)
		}
		reg := hostfuncs.NewRegistry()
		cfg := wasmbox.Config{Tools: reg}
		if err := Attach(&cfg, c); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHangIsBoundedByTheCallTimeout: a server that never answers (and ignores cancellation) costs the call its
// timeout, not a hang.
func TestHangIsBoundedByTheCallTimeout(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "hang", Version: "1"}, nil)
	release := make(chan struct{}) // only so that the test's in-process server can be closed at the end
	s.AddTool(&sdk.Tool{Name: "hang", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			<-release
			return &sdk.CallToolResult{}, nil
		})
	c, err := inMemory(t, s, Config{CallTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release) })
	start := time.Now()
	_, err = c.Tools()[0].Handler(context.Background(), json.RawMessage(`{}`))
	if !errors.Is(err, ErrToolError) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the call took %v", d)
	}
}

func readPid(t *testing.T, f string) int {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// TestServerProcessLifecycle: a real child process over stdio. A crash in the middle of a call is a clear
// error, the next call restarts the server, restarts are bounded, a hang is bounded by the timeout, and the
// Sandbox's Close stops the process.
func TestServerProcessLifecycle(t *testing.T) {
	ctx := context.Background()
	pidfile := filepath.Join(t.TempDir(), "pid")
	c, err := Connect(ctx, selfServer(t, pidfile), Config{CallTimeout: 2 * time.Second, MaxRestarts: 1})
	if err != nil {
		t.Fatal(err)
	}
	tools := byName(c)
	if _, err := tools["echo"].Handler(ctx, json.RawMessage(`{"text":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	first := readPid(t, pidfile)
	_, err = tools["crash"].Handler(ctx, json.RawMessage(`{}`))
	if !errors.Is(err, ErrServerDead) {
		t.Fatalf("crash: err = %v, want ErrServerDead", err)
	}
	out, err := tools["echo"].Handler(ctx, json.RawMessage(`{"text":"again"}`))
	if err != nil || string(out) != `"again"` {
		t.Fatalf("after restart: %s, %v", out, err)
	}
	if c.Restarts() != 1 || readPid(t, pidfile) == first {
		t.Fatalf("restarts %d, pid %d (first %d)", c.Restarts(), readPid(t, pidfile), first)
	}
	start := time.Now()
	if _, err = tools["hang"].Handler(ctx, json.RawMessage(`{}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("hang took %v", d)
	}
	if _, err = tools["crash"].Handler(ctx, json.RawMessage(`{}`)); !errors.Is(err, ErrServerDead) {
		t.Fatalf("second crash: %v", err)
	}
	_, err = tools["echo"].Handler(ctx, json.RawMessage(`{"text":"x"}`))
	if !errors.Is(err, ErrServerDead) || !strings.Contains(err.Error(), "not restarted") {
		t.Fatalf("past MaxRestarts: %v", err)
	}
	c.Close(ctx)

	// The Sandbox owns the server: Close stops its process.
	c, err = Connect(ctx, selfServer(t, pidfile), Config{TrustAnnotations: true})
	if err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, pidfile)
	cfg := wasmbox.Config{}
	if err := Attach(&cfg, c); err != nil {
		t.Fatal(err)
	}
	sb, err := wasmbox.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Run(ctx, "import tools\nprint(tools.echo(text='through the gate'))")
	if err != nil || res.Stdout != "through the gate\n" {
		t.Fatalf("%v %q %s", err, res.Stdout, res.Stderr)
	}
	if !alive(pid) {
		t.Fatal("server not running before Close")
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		t.Fatal("server process still running after Sandbox.Close")
	}
	if _, err := c.Tools()[0].Handler(ctx, json.RawMessage(`{}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestHugeHTTPResponseIsRefused: the SDK reads a streamable HTTP JSON body whole; the client bounds it.
func TestHugeHTTPResponseIsRefused(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat(" ", 1<<20))
		for range 40 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer hs.Close()
	_, err := Connect(context.Background(), Server{URL: hs.URL}, Config{ConnectTimeout: 20 * time.Second})
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
	}
}

// TestFailedStartSaysWhy: a stdio server that cannot start is a clear error with the end of its stderr.
func TestFailedStartSaysWhy(t *testing.T) {
	srv := selfServer(t, filepath.Join(t.TempDir(), "pid"))
	srv.Env = append(srv.Env, "WASMBOX_MCP_TEST_FAIL=missing API_TOKEN")
	_, err := Connect(context.Background(), srv, Config{ConnectTimeout: 20 * time.Second})
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "server stderr:") || !strings.Contains(err.Error(), "missing API_TOKEN") {
		t.Fatalf("err = %v", err)
	}
	if len(err.Error()) > 4<<10 {
		t.Fatalf("error of %d bytes: the stderr kept is not bounded", len(err.Error()))
	}
}

// TestMaxToolsEdges: a server listing exactly MaxTools tools is accepted, one more is refused.
func TestMaxToolsEdges(t *testing.T) {
	server := func() *sdk.Server {
		s := sdk.NewServer(&sdk.Implementation{Name: "three", Version: "1"}, nil)
		h := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return nil, nil }
		for _, n := range []string{"a", "b", "c"} {
			s.AddTool(&sdk.Tool{Name: n, InputSchema: map[string]any{"type": "object"}}, h)
		}
		return s
	}
	c, err := inMemory(t, server(), Config{MaxTools: 3})
	if err != nil || len(c.Tools()) != 3 {
		t.Fatalf("3 tools with MaxTools 3: %v, %v", err, c)
	}
	_, err = inMemory(t, server(), Config{MaxTools: 2})
	if !errors.Is(err, ErrBound) || !strings.Contains(err.Error(), "more than 2 tools") {
		t.Fatalf("3 tools with MaxTools 2: err = %v, want ErrBound", err)
	}
}

// TestServerNaming: an npx server is named by its package (scope/name, no version), not "npx".
func TestServerNaming(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"npx", "-y", "@modelcontextprotocol/server-everything"}, "@modelcontextprotocol/server-everything"},
		{[]string{"/usr/bin/npx", "--yes", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"}, "@modelcontextprotocol/server-everything"},
		{[]string{"npx", "mcp-server-fetch@latest"}, "mcp-server-fetch"},
		{[]string{"npx", "-y", "--package=@scope/pkg@1", "pkg-bin"}, "@scope/pkg"},
		{[]string{"npx", "-p", "@scope/other", "bin"}, "@scope/other"},
		{[]string{"npx"}, "npx"},
		{[]string{"/opt/bin/my-server", "--flag"}, "my-server"},
	} {
		if got := (Server{Command: tc.argv}).name(); got != tc.want {
			t.Errorf("%q: name %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// hostileText has every kind of terminal control a server might slip into a name or its stderr: an escape
// sequence, an OSC 52 clipboard write, a carriage return that overwrites the line, a bidi override.
const hostileText = "\x1b[2J\x1b]52;c;ZXZpbA==\x07\rforged\u202eevil"

func assertClean(t *testing.T, what, s string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e"} {
		if strings.Contains(s, bad) {
			t.Errorf("%s holds the raw control %q: %q", what, bad, s)
		}
	}
}

// TestServerChosenTextIsEscaped: names, errors and the stderr tail that wasmbox prints are escaped.
func TestServerChosenTextIsEscaped(t *testing.T) {
	t.Run("stderr tail", func(t *testing.T) {
		srv := selfServer(t, filepath.Join(t.TempDir(), "pid"))
		srv.Env = append(srv.Env, "WASMBOX_MCP_TEST_FAIL=missing token "+hostileText)
		_, err := Connect(context.Background(), srv, Config{ConnectTimeout: 20 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "missing token") {
			t.Fatalf("err = %v", err)
		}
		assertClean(t, "the error", err.Error())
	})
	t.Run("server and tool names", func(t *testing.T) {
		s := sdk.NewServer(&sdk.Implementation{Name: "x", Version: "1"}, nil)
		s.AddTool(&sdk.Tool{Name: "t" + hostileText, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no"}}}, nil
			})
		s.AddTool(&sdk.Tool{Name: "big" + hostileText, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("x", 100)}}}, nil
			})
		ctx := context.Background()
		ct, st := sdk.NewInMemoryTransports()
		ss, err := s.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ss.Close()
		c, err := Connect(ctx, Server{Name: "srv" + hostileText, Transport: ct}, Config{MaxResultBytes: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		assertClean(t, "Name", c.Name())
		if len(c.Tools()) != 2 {
			t.Fatalf("tools: %v", c.Tools())
		}
		for _, tool := range c.Tools() {
			_, err := tool.Handler(ctx, json.RawMessage(`{}`))
			if err == nil {
				t.Fatalf("%s: no error", tool.Name)
			}
			assertClean(t, tool.Name+"'s error", err.Error())
		}
	})
}

// TestCancelledCallSaysSo: a call whose caller cancelled it is a cancellation (errors.Is context.Canceled),
// not "no answer in time".
func TestCancelledCallSaysSo(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "hang", Version: "1"}, nil)
	release := make(chan struct{})
	s.AddTool(&sdk.Tool{Name: "hang", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			<-release
			return &sdk.CallToolResult{}, nil
		})
	c, err := inMemory(t, s, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = c.Tools()[0].Handler(ctx, json.RawMessage(`{}`))
	if !errors.Is(err, ErrToolError) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cancelled") ||
		strings.Contains(err.Error(), "in time") {
		t.Fatalf("err = %v, want a cancellation", err)
	}
}

// TestToolErrorsLeaveNoGoroutines: an error answer is classified from the error itself; nothing is left
// waiting on the session per error (the client once started a goroutine per error that waited on the
// session for as long as it lived).
func TestToolErrorsLeaveNoGoroutines(t *testing.T) {
	c, err := inMemory(t, mappingServer(), Config{TrustAnnotations: true})
	if err != nil {
		t.Fatal(err)
	}
	tool := byName(c)["protocol_error"]
	ctx := context.Background()
	call := func() {
		if _, err := tool.Handler(ctx, json.RawMessage(`{}`)); !errors.Is(err, ErrToolError) || errors.Is(err, ErrServerDead) {
			t.Fatalf("err = %v, want a tool error on a live server", err)
		}
	}
	call()
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	for range 50 {
		call()
	}
	time.Sleep(100 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before+10 {
		t.Fatalf("goroutines: %d before 50 error answers, %d after", before, after)
	}
}
