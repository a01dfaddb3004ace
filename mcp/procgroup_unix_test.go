//go:build unix

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestCloseEndsTheServersDescendants: a stdio server that started a process of its own (which holds the
// server's stderr open) leaves nothing behind: Close returns promptly and the descendant is gone. Without the
// process group the descendant outlives the server, and Close waits for its stderr until ctx ends.
func TestCloseEndsTheServersDescendants(t *testing.T) {
	dir := t.TempDir()
	srv := selfServer(t, filepath.Join(dir, "pid"))
	descendant := filepath.Join(dir, "descendant")
	srv.Env = append(srv.Env, "WASMBOX_MCP_TEST_DESCENDANT="+descendant)
	ctx := context.Background()
	c, err := Connect(ctx, srv, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := byName(c)["echo"].Handler(ctx, json.RawMessage(`{"text":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, descendant)
	if !alive(pid) {
		t.Fatal("the descendant is not running before Close")
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		t.Fatalf("Close: %v (after %v)", err, time.Since(start))
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		t.Fatalf("the server's descendant %d still runs after Close", pid)
	}
}

// stallScript is a stdio "server" that never answers initialize: it records its pid, its environment and the
// pid of a grandchild that left its process group (setsid), then sleeps.
const stallScript = `echo $$ > "$1"
env > "$2"
setsid sleep 300 &
echo $! > "$3"
exec sleep 300
`

// stallServer writes stallScript to dir and returns the server and its three files.
func stallServer(t *testing.T, dir string) (srv Server, pidf, envf, childf string) {
	t.Helper()
	script := filepath.Join(dir, "stall.sh")
	if err := os.WriteFile(script, []byte(stallScript), 0o755); err != nil {
		t.Fatal(err)
	}
	pidf, envf, childf = filepath.Join(dir, "pid"), filepath.Join(dir, "env"), filepath.Join(dir, "child")
	return Server{Name: "stall", Command: []string{"sh", script, pidf, envf, childf}}, pidf, envf, childf
}

// waitFile waits for f to be written (the script runs concurrently).
func waitFile(t *testing.T, f string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, err := os.ReadFile(f); err == nil && len(bytes.TrimSpace(b)) > 0 {
			pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written", f)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone waits until pid has ended (on Linux: and was reaped, so that no zombie is left), reporting whether it did.
func gone(pid int, reaped bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			if !reaped || runtime.GOOS != "linux" {
				return true
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// TestStalledHandshakeKillsTheServer: a server that never answers initialize fails Connect at ConnectTimeout,
// and neither it nor its setsid grandchild outlives the failure. Before, the server was left running (and
// re-parented to init when this process ended).
func TestStalledHandshakeKillsTheServer(t *testing.T) {
	srv, pidf, _, childf := stallServer(t, t.TempDir())
	start := time.Now()
	_, err := Connect(context.Background(), srv, Config{ConnectTimeout: 700 * time.Millisecond})
	if !errors.Is(err, ErrConnect) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrConnect and DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Connect took %v against a ConnectTimeout of 700ms", d)
	}
	pid, child := waitFile(t, pidf), waitFile(t, childf)
	if !gone(pid, false) {
		t.Errorf("the stalled server %d still runs after Connect failed", pid)
	}
	if !gone(child, true) {
		t.Errorf("the server's setsid grandchild %d still runs (or is an unreaped zombie) after Connect failed", child)
	}
}

// TestStalledHandshakeEndsWithTheCallersContext: cancelling ctx ends the wait and the server at once.
func TestStalledHandshakeEndsWithTheCallersContext(t *testing.T) {
	srv, pidf, _, _ := stallServer(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitFile(t, pidf)
		cancel()
	}()
	_, err := Connect(ctx, srv, Config{ConnectTimeout: time.Minute})
	if !errors.Is(err, ErrConnect) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrConnect and Canceled", err)
	}
	if pid := waitFile(t, pidf); !gone(pid, false) {
		t.Errorf("the server %d still runs after its Connect was cancelled", pid)
	}
}

// TestCloseEndsASetsidDescendant: a descendant that left the server's process group and session (setsid) is
// killed and reaped by Close. A process-group kill alone misses it.
func TestCloseEndsASetsidDescendant(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux tracks descendants that left the process group (procfs, child subreaper); see procgroup_unixother.go")
	}
	dir := t.TempDir()
	srv := selfServer(t, filepath.Join(dir, "pid"))
	descendant := filepath.Join(dir, "setsid")
	srv.Env = append(srv.Env, "WASMBOX_MCP_TEST_SETSID="+descendant)
	ctx := context.Background()
	c, err := Connect(ctx, srv, Config{})
	if err != nil {
		t.Fatal(err)
	}
	pid := waitFile(t, descendant)
	if !alive(pid) {
		t.Fatal("the setsid descendant is not running before Close")
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !gone(pid, true) {
		t.Fatalf("the server's setsid descendant %d still runs (or is an unreaped zombie) after Close", pid)
	}
}

// TestRefusedToolListStopsTheServer: a server whose tool list is refused (more than MaxTools) is stopped with
// its descendants, the setsid one included (on Linux).
func TestRefusedToolListStopsTheServer(t *testing.T) {
	dir := t.TempDir()
	pidf := filepath.Join(dir, "pid")
	srv := selfServer(t, pidf)
	descendant := filepath.Join(dir, "setsid")
	if runtime.GOOS == "linux" {
		srv.Env = append(srv.Env, "WASMBOX_MCP_TEST_SETSID="+descendant)
	}
	_, err := Connect(context.Background(), srv, Config{MaxTools: 1})
	if !errors.Is(err, ErrBound) {
		t.Fatalf("err = %v, want ErrBound", err)
	}
	if pid := waitFile(t, pidf); !gone(pid, false) {
		t.Errorf("the server %d still runs after its tool list was refused", pid)
	}
	if runtime.GOOS == "linux" {
		if pid := waitFile(t, descendant); !gone(pid, true) {
			t.Errorf("the server's setsid descendant %d still runs after its tool list was refused", pid)
		}
	}
}
