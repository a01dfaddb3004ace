package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/npmtest"
)

// TestRunMCPEverything is the CLI with the reference MCP server over stdio: its tools are called through the
// Gate (a policy file denies get_env, the default approver denies what needs approval) and audited.
func TestRunMCPEverything(t *testing.T) {
	argv := npmtest.Everything(t, "stdio")
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	os.WriteFile(policy, []byte("version: 1\nallow: [get_sum, echo, toggle_simulated_logging]\ndeny: [get_env]\ntools:\n  get_sum: {effect: read_only}\n  echo: {effect: read_only}\n  toggle_simulated_logging: {approval: always}\n"), 0o644)
	logf := filepath.Join(dir, "audit.jsonl")
	code, out, errOut := cli(t, "", "run", "--json", "--mcp", strings.Join(argv, " "), "--policy", policy, "--audit", logf, "-c", `import tools
print(tools.get_sum(a=2, b=40))
print(tools.echo(message="hello"))
for f in (tools.get_env, tools.toggle_simulated_logging):
    try:
        f()
    except tools.ToolDenied as e:
        print(type(e).__name__)
`)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var res jsonResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err, out)
	}
	if want := "The sum of 2 and 40 is 42.\nEcho: hello\nToolDenied\nApprovalDenied\n"; res.Stdout != want {
		t.Errorf("stdout %q, want %q", res.Stdout, want)
	}
	var statuses []string
	for _, c := range res.ToolCalls {
		statuses = append(statuses, c.Tool+":"+c.Status)
	}
	if got := strings.Join(statuses, " "); got != "get_sum:ok echo:ok get_env:denied toggle_simulated_logging:denied" {
		t.Errorf("tool calls: %s", got)
	}
	// The audit log holds the same calls and verifies against the anchor the run printed.
	b, _ := os.ReadFile(logf)
	var outcomes []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r governance.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, r.Tool+":"+string(r.Outcome))
	}
	if got := strings.Join(outcomes, " "); got != "get_sum:allowed get_sum:ok echo:allowed echo:ok get_env:denied toggle_simulated_logging:denied" {
		t.Errorf("audit: %s", got)
	}
	if code, vout, verr := cli(t, "", "audit", "verify", "--head", res.AuditHead, "--count", "6", logf); code != 0 {
		t.Errorf("audit verify: %d %s %s", code, vout, verr)
	}
}

// unannotatedServer serves one tool without annotations (so: irreversible, approval needed) over streamable HTTP
// on loopback.
func unannotatedServer(t *testing.T) string {
	s := sdk.NewServer(&sdk.Implementation{Name: "pay", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "send-payment", Description: "Pay someone.", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"amount": map[string]any{"type": "number"}}, "required": []string{"amount"}}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{StructuredContent: map[string]any{"paid": true}}, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestRunMCPApprove(t *testing.T) {
	url := unannotatedServer(t)
	prog := "import tools\ntry:\n    print(tools.send_payment(5))\nexcept tools.ToolDenied as e:\n    print(type(e).__name__)\n"
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{nil, "", "ApprovalDenied\n"}, // deny is the default
		{[]string{"--approve", "deny"}, "", "ApprovalDenied\n"},
		{[]string{"--approve", "allow"}, "", "{'paid': True}\n"},
		{[]string{"--approve", "ask"}, "y\n", "{'paid': True}\n"},
		{[]string{"--approve", "ask"}, "n\n", "ApprovalDenied\n"},
	} {
		args := append([]string{"run", "--mcp", url}, tc.args...)
		code, out, errOut := cli(t, tc.stdin, append(args, "-c", prog)...)
		if code != 0 || out != tc.want {
			t.Errorf("%v stdin %q: exit %d, stdout %q, want %q; stderr %s", tc.args, tc.stdin, code, out, tc.want, errOut)
		}
		if tc.args != nil && tc.args[1] == "ask" && !strings.Contains(errOut, "send_payment") {
			t.Errorf("ask: the question does not name the tool: %s", errOut)
		}
	}
	if code, _, errOut := cli(t, "", "run", "--approve", "maybe", "-c", "pass"); code != exitUsage || !strings.Contains(errOut, "allow, deny or ask") {
		t.Errorf("bad --approve: %d %s", code, errOut)
	}
	if code, _, errOut := cli(t, "", "run", "--mcp", "/nonexistent/server", "-c", "pass"); code != exitFailure || !strings.Contains(errOut, "cannot connect") {
		t.Errorf("bad server: %d %s", code, errOut)
	}
}

func TestSplitCommand(t *testing.T) {
	got, err := splitCommand(`npx -y "@scope/pkg name" 'a b' c\ d`)
	if err != nil || strings.Join(got, "|") != "npx|-y|@scope/pkg name|a b|c d" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := splitCommand(`"open`); err == nil {
		t.Fatal("unterminated quote accepted")
	}
}

// TestMCPServeHTTP serves the sandbox over streamable HTTP on loopback and calls run_python with the Go SDK.
func TestMCPServeHTTP(t *testing.T) {
	if code, _, errOut := cli(t, "", "mcp", "--http", "0.0.0.0:0"); code != exitUsage || !strings.Contains(errOut, "not a loopback address") {
		t.Fatalf("remote address: %d %s", code, errOut)
	}
	for _, bad := range []string{"*", "null", "https://app.example/path"} {
		if code, _, errOut := cli(t, "", "mcp", "--http", "127.0.0.1:0", "--allow-origin", bad); code != exitUsage || !strings.Contains(errOut, "origin") {
			t.Fatalf("--allow-origin %q: %d %s", bad, code, errOut)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"mcp", "--http", "127.0.0.1:0", "--allow-origin", "https://app.example"}, strings.NewReader(""), io.Discard, pw)
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	url := strings.TrimSpace(line[strings.Index(line, "http://"):])
	// A page of another origin gets 403 (the MCP transport's Origin rule); the one --allow-origin names gets CORS.
	for origin, want := range map[string]int{"https://evil.example": http.StatusForbidden, "https://app.example": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || (want == http.StatusOK) != (resp.Header.Get("Access-Control-Allow-Origin") == origin) {
			t.Errorf("Origin %s: status %d, CORS %q", origin, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print(6 * 7)"}})
	if err != nil || r.IsError {
		t.Fatal(err, r)
	}
	if out := r.StructuredContent.(map[string]any)["stdout"]; out != "42\n" {
		t.Errorf("stdout %v", out)
	}
	cs.Close()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wasmbox mcp did not stop")
	}
}

// TestInspectorCallsRunPython: the MCP Inspector's CLI (a real third-party client) starts `wasmbox mcp` over
// stdio and calls run_python.
func TestInspectorCallsRunPython(t *testing.T) {
	insp := npmtest.Inspector(t)
	bin := filepath.Join(t.TempDir(), "wasmbox")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/wasmbox/wasmbox/cmd/wasmbox").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	args := append(insp[1:], bin, "mcp", "--method", "tools/call", "--tool-name", "run_python",
		"--tool-arg", "code=import sys; print(sum(range(10)), sys.platform)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, insp[0], args...).Output()
	if err != nil {
		t.Fatalf("inspector: %v\n%s", err, out)
	}
	i := strings.Index(string(out), "{")
	if i < 0 {
		t.Fatalf("no JSON in %s", out)
	}
	var res struct {
		StructuredContent struct {
			Stdout   string `json:"stdout"`
			ExitCode int    `json:"exit_code"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(out[i:], &res); err != nil {
		t.Fatal(err, string(out))
	}
	if res.StructuredContent.Stdout != "45 wasi\n" || res.StructuredContent.ExitCode != 0 {
		t.Errorf("inspector got %+v", res.StructuredContent)
	}
}

// TestMCPHonoursCacheEnvironment: `wasmbox mcp` used to ignore WASMBOX_CACHE_DIR, WASMBOX_CACHE_MAX and
// WASMBOX_PRECOMPILED, so the documented serverless set-up did not apply to it.
func TestMCPHonoursCacheEnvironment(t *testing.T) {
	t.Setenv("WASMBOX_CACHE_MAX", "lots")
	if code, _, errOut := cli(t, "", "mcp"); code != exitUsage || !strings.Contains(errOut, "WASMBOX_CACHE_MAX") {
		t.Fatalf("WASMBOX_CACHE_MAX=lots: %d %s", code, errOut)
	}
	t.Setenv("WASMBOX_CACHE_MAX", "")
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	t.Setenv("WASMBOX_PRECOMPILED", missing)
	if code, _, errOut := cli(t, "", "mcp"); code == 0 || !strings.Contains(errOut, "no-such-dir") {
		t.Fatalf("WASMBOX_PRECOMPILED=%s: %d %s", missing, code, errOut)
	}
}
