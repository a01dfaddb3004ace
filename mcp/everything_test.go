package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/npmtest"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// everythingProgram uses the reference server's echo and get-sum tools, and checks their mapping.
const everythingProgram = `import tools
print(tools.get_sum(a=2, b=40))
print(tools.echo(message="hello"))
try:
    tools.get_env()
except tools.ToolDenied as e:
    print("denied:", type(e).__name__)
`

// runEverything attaches c to a Sandbox whose policy marks get_sum and echo read-only (the server's own hints
// count for nothing) and denies get_env (which would hand the server's environment to the program), and runs
// everythingProgram.
func runEverything(t *testing.T, c *Client) {
	t.Helper()
	ctx := context.Background()
	for _, tool := range c.Tools() {
		if tool.Effect != governance.EffectUnspecified {
			t.Errorf("%s: effect %v, want unspecified: the server's annotations are not trusted by default", tool.Name, tool.Effect)
		}
	}
	spec, err := governance.ParsePolicy([]byte("allow_all: true\ndeny: [get_env]\ntools:\n  get_sum: {effect: read_only}\n  echo: {effect: read_only}\n"), "yaml")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := governance.NewPolicy(*spec)
	if err != nil {
		t.Fatal(err)
	}
	gcfg := wasmbox.DefaultGateConfig()
	gcfg.Policy = pol
	sb := gatedSandbox(t, gcfg, c)
	res, err := sb.Run(ctx, everythingProgram)
	if err != nil {
		t.Fatal(err, res.Stderr)
	}
	if want := "The sum of 2 and 40 is 42.\nEcho: hello\ndenied: ToolDenied\n"; res.Stdout != want {
		t.Errorf("stdout %q, want %q; stderr %s", res.Stdout, want, res.Stderr)
	}
}

func TestEverythingStdio(t *testing.T) {
	argv := npmtest.Everything(t, "stdio")
	c, err := Connect(context.Background(), Server{Command: argv}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	runEverything(t, c)
}

func TestEverythingStreamableHTTP(t *testing.T) {
	argv := npmtest.Everything(t, "streamableHttp")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s: %s", addr, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, err := Connect(context.Background(), Server{URL: "http://" + addr + "/mcp"}, Config{})
	if err != nil {
		t.Fatal(err, logs.String())
	}
	runEverything(t, c)
}

// TestEverythingToolsNeedApprovalByDefault: server-everything marks echo read-only and closed-world and its
// fetching tool (gzip-file-as-resource, which downloads a URL) not destructive. Without a policy, none of it
// counts: the default gate with no approver denies both. With TrustAnnotations (a server one controls), echo is
// read-only and the fetching tool, being open-world, is irreversible: it still needs approval.
func TestEverythingToolsNeedApprovalByDefault(t *testing.T) {
	argv := npmtest.Everything(t, "stdio")
	ctx := context.Background()
	c, err := Connect(ctx, Server{Command: argv}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	sb := gatedSandbox(t, wasmbox.DefaultGateConfig(), c)
	// A data: URL, so that even a wrongly allowed call would not reach the network.
	res, err := sb.Run(ctx, `import tools
for f, kw in ((tools.echo, {"message": "hi"}), (tools.gzip_file_as_resource, {"data": "data:text/plain,hello"})):
    try:
        print(f(**kw))
    except tools.ApprovalDenied as e:
        print("denied")
`)
	if err != nil {
		t.Fatal(err, res.Stderr)
	}
	if res.Stdout != "denied\ndenied\n" {
		t.Errorf("stdout %q, want both calls denied; stderr %s", res.Stdout, res.Stderr)
	}
	if d := byName(c)["gzip_file_as_resource"].Description; !strings.Contains(d, "open world") {
		t.Errorf("the description does not show the hints: %q", d)
	}

	trusted, err := Connect(ctx, Server{Command: argv}, Config{TrustAnnotations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer trusted.Close(ctx)
	tools := byName(trusted)
	for name, eff := range map[string]governance.Effect{"echo": governance.ReadOnly, "get_sum": governance.ReadOnly,
		"toggle_simulated_logging": governance.Mutating, "gzip_file_as_resource": governance.Irreversible} {
		if tools[name].Effect != eff {
			t.Errorf("TrustAnnotations: %s: effect %v, want %v", name, tools[name].Effect, eff)
		}
	}
}

// TestEverythingGetsAMinimalEnvironment: server-everything's get-env returns its whole environment. A secret
// in this process's environment does not reach it; a variable named in Server.Env does, and so does PATH.
func TestEverythingGetsAMinimalEnvironment(t *testing.T) {
	argv := npmtest.Everything(t, "stdio")
	t.Setenv("WASMBOX_TEST_SECRET_TOKEN", "hunter2-secret")
	t.Setenv("WASMBOX_TEST_PASSED", "passed-by-name")
	ctx := context.Background()
	c, err := Connect(ctx, Server{Command: argv, Env: []string{"WASMBOX_TEST_PASSED", "WASMBOX_TEST_SET=set-here"}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	out, err := byName(c)["get_env"].Handler(ctx, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	env := string(out)
	if strings.Contains(env, "hunter2-secret") || strings.Contains(env, "WASMBOX_TEST_SECRET_TOKEN") {
		t.Errorf("the parent's secret reached the server: %s", env)
	}
	for _, want := range []string{"passed-by-name", "set-here", `\"PATH\"`} {
		if !strings.Contains(env, want) {
			t.Errorf("the server's environment lacks %s: %s", want, env)
		}
	}
}

// TestEverythingThroughNpx: server-everything started by npx, offline from the local install, works with the
// minimal environment (only BaseEnv reaches npx) and is named by its package, not "npx".
func TestEverythingThroughNpx(t *testing.T) {
	dir := npmtest.Dir(t)
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("no npx on PATH")
	}
	ctx := context.Background()
	c, err := Connect(ctx, Server{Command: []string{npx, "--offline", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"}, Dir: dir}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if c.Name() != "@modelcontextprotocol/server-everything" {
		t.Errorf("name %q, want the package's", c.Name())
	}
	out, err := byName(c)["echo"].Handler(ctx, json.RawMessage(`{"message":"via npx"}`))
	if err != nil || !strings.Contains(string(out), "via npx") {
		t.Fatalf("echo: %s, %v", out, err)
	}
}
