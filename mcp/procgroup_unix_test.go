//go:build unix

package mcp

import (
	"context"
	"encoding/json"
	"path/filepath"
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
