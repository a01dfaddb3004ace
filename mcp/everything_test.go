package mcp

import (
	"context"
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

// runEverything attaches c to a Sandbox whose policy denies get_env (which would hand the server's environment
// to the program) and runs everythingProgram.
func runEverything(t *testing.T, c *Client) {
	t.Helper()
	ctx := context.Background()
	tools := byName(c)
	for name, eff := range map[string]governance.Effect{"get_sum": governance.ReadOnly, "echo": governance.ReadOnly,
		"toggle_simulated_logging": governance.Mutating} {
		if tools[name].Effect != eff {
			t.Errorf("%s: effect %v, want %v (tools: %v)", name, tools[name].Effect, eff, c.Tools())
		}
	}
	spec, err := governance.ParsePolicy([]byte("allow_all: true\ndeny: [get_env]\n"), "yaml")
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
