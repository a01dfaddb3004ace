package escalate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Tests of the tool socket's bounds: each drives the server (directly, or over a real unix socket with a fake
// peer) past one bound and checks that it holds.

// send is one request line through the handler, as a connection would.
func send(s *runServer, cur **fileState, req map[string]any) response {
	req["v"] = 1
	line, _ := json.Marshal(req)
	var resp response
	resp, *cur = s.handle(line, *cur)
	return resp
}

func wantErrType(t *testing.T, what string, resp response, typ string) {
	t.Helper()
	if resp.OK || resp.Error == nil || resp.Error.Type != typ {
		t.Fatalf("%s: got %+v, want an error of type %s", what, resp, typ)
	}
}

func TestSocketPathBounds(t *testing.T) {
	name := strings.Repeat("n", MaxNameBytes)
	long := strings.TrimSuffix(strings.Repeat(name+"/", MaxPathBytes/(MaxNameBytes+1)), "/") // 4095 bytes
	deep := strings.TrimSuffix(strings.Repeat("d/", MaxPathDepth), "/")                      // 256 levels
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{long, true},
		{long + "/x", false}, // 4097 bytes
		{deep, true},
		{deep + "/d", false}, // 257 levels
		{"./" + deep + "/./", true},
		{name, true},
		{name + "n", false}, // a 256-byte name
		{strings.Repeat("/", 1<<20), false},
		{strings.Repeat("./", 1<<19) + "x", false},
	} {
		s := newRunServer(t.Context(), nil, nil, serverLimits{outBytes: 1 << 20})
		var cur *fileState
		resp := send(s, &cur, map[string]any{"op": "file", "path": c.path})
		label := fmt.Sprintf("path of %d bytes", len(c.path))
		if c.ok != resp.OK {
			t.Errorf("%s: ok=%v, want %v (%+v)", label, resp.OK, c.ok, resp.Error)
		}
		if !c.ok {
			wantErrType(t, label, resp, "ProtocolError")
		}
		if !c.ok && (cur != nil || len(s.files) != 0) {
			t.Errorf("%s: a refused path was kept", label)
		}
	}
}

func TestSocketFileCount(t *testing.T) {
	in := map[string][]byte{"in/1": nil, "in/2": nil}
	s := newRunServer(t.Context(), nil, in, serverLimits{outBytes: 1 << 20, outFiles: 5})
	var cur *fileState
	for i := range 4 {
		if resp := send(s, &cur, map[string]any{"op": "file", "path": fmt.Sprint("f", i)}); !resp.OK {
			t.Fatalf("file %d: %+v", i, resp.Error)
		}
	}
	// Deletes of paths that were never input keep nothing and count nothing.
	for i := range 20 {
		if resp := send(s, &cur, map[string]any{"op": "delete", "path": fmt.Sprint("never/", i)}); !resp.OK {
			t.Fatalf("delete %d: %+v", i, resp.Error)
		}
	}
	if len(s.deleted) != 0 {
		t.Fatalf("%d deletions of non-input paths kept", len(s.deleted))
	}
	if resp := send(s, &cur, map[string]any{"op": "delete", "path": "in/1"}); !resp.OK { // the 5th entry
		t.Fatalf("delete of an input file: %+v", resp.Error)
	}
	wantErrType(t, "the 6th entry", send(s, &cur, map[string]any{"op": "delete", "path": "in/2"}), "LimitExceeded")
	wantErrType(t, "after the cut", send(s, &cur, map[string]any{"op": "file", "path": "g"}), "LimitExceeded")
	files, changes, complete := s.changes(in)
	if complete || len(files)+len(s.deleted) > 5 || len(changes) > 5 {
		t.Fatalf("complete %v, %d files, %d changes: want the transfer cut at 5 entries", complete, len(files), len(changes))
	}
	// The count is an entry count: sending the same file again does not use another.
	s = newRunServer(t.Context(), nil, nil, serverLimits{outBytes: 1 << 20, outFiles: 1})
	cur = nil
	for i := range 10 {
		if resp := send(s, &cur, map[string]any{"op": "file", "path": "same"}); !resp.OK {
			t.Fatalf("same file, time %d: %+v", i, resp.Error)
		}
	}
	wantErrType(t, "a 2nd entry", send(s, &cur, map[string]any{"op": "file", "path": "other"}), "LimitExceeded")
}

func TestSocketBytesIncludePaths(t *testing.T) {
	// Empty files with long names: no data at all, but the names are kept and count.
	s := newRunServer(t.Context(), nil, nil, serverLimits{outBytes: 3000})
	var cur *fileState
	p := strings.Repeat("p", 200)
	n := 0
	for i := range 100 {
		resp := send(s, &cur, map[string]any{"op": "file", "path": fmt.Sprintf("%s/%03d", p, i)})
		if !resp.OK {
			wantErrType(t, "over the bytes", resp, "LimitExceeded")
			break
		}
		n++
	}
	if n != 14 { // 204 bytes each: 14 fit in 3000
		t.Fatalf("%d empty files with 204-byte paths accepted under a 3000-byte limit, want 14", n)
	}
	if _, _, complete := s.changes(nil); complete {
		t.Error("a cut-off transfer must not be complete")
	}
	// A deleted input file's path counts too.
	in := map[string][]byte{p: nil}
	s = newRunServer(t.Context(), nil, in, serverLimits{outBytes: 100})
	cur = nil
	wantErrType(t, "a 200-byte deleted path under 100 bytes", send(s, &cur, map[string]any{"op": "delete", "path": p}), "LimitExceeded")
}

func TestSocketOpsEndTheJob(t *testing.T) {
	// Resending one empty file is free in entries and bytes; the op budget ends it.
	var failed []error
	s := newRunServer(t.Context(), nil, nil, serverLimits{outBytes: 1 << 20, outFiles: 10})
	s.onFail = func(err error) { failed = append(failed, err) }
	var cur *fileState
	budget := s.maxOps
	if budget != 2*10+(1<<20)/opsChunk+16 {
		t.Fatalf("op budget %d", budget)
	}
	for i := range budget {
		if resp := send(s, &cur, map[string]any{"op": "file", "path": "x"}); !resp.OK {
			t.Fatalf("op %d within the budget: %+v", i, resp.Error)
		}
	}
	for range 100 {
		wantErrType(t, "past the budget", send(s, &cur, map[string]any{"op": "file", "path": "x"}), "LimitExceeded")
	}
	if len(failed) != 1 || !errors.Is(failed[0], ErrSocketLimit) || !errors.Is(s.err(), ErrSocketLimit) {
		t.Fatalf("onFail calls %v, err %v: want exactly one, matching ErrSocketLimit", failed, s.err())
	}
	if !strings.HasPrefix(s.err().Error(), "escalate: ") {
		t.Errorf("error %q", s.err())
	}
}

// TestSocketFloodFromFinding replays the reported attack (file ops with 4 KB paths plus as many deletes; 150,000
// of each kept 1.6 GB) against the default limits, 20,000 of each (past the op budget, to keep the test short):
// the host keeps at most FilesOutCount entries and FilesOutBytes bytes, and the job is ended.
func TestSocketFloodFromFinding(t *testing.T) {
	var ended error
	in := map[string][]byte{}
	s := newRunServer(t.Context(), nil, in, serverLimits{outBytes: DefaultWorkspaceBytes, outFiles: DefaultFilesOutCount})
	s.onFail = func(err error) { ended = err }
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var cur *fileState
	dir := strings.Repeat("a", 250) + "/"
	prefix := strings.Repeat(dir, 4000/len(dir))
	for i := range 20_000 {
		p := fmt.Sprintf("%s%08d", prefix, i)
		send(s, &cur, map[string]any{"op": "file", "path": p})
		send(s, &cur, map[string]any{"op": "delete", "path": p + "d"})
	}
	files, changes, complete := s.changes(in)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if complete || len(files) > DefaultFilesOutCount || len(changes) > DefaultFilesOutCount {
		t.Fatalf("complete %v, %d files, %d changes", complete, len(files), len(changes))
	}
	if !errors.Is(ended, ErrSocketLimit) {
		t.Fatalf("the job was not ended: %v", ended)
	}
	// Kept: at most 64 MiB of paths (the bytes limit); the unbounded server kept 1.2 GB here.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 256<<20 {
		t.Fatalf("heap grew by %d MiB", grew>>20)
	}
	t.Logf("%d files kept, %d ops, ended: %v", len(files), s.ops, ended)
}

func dialServer(t *testing.T, sock string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func TestSocketTooManyConnections(t *testing.T) {
	_, sock := startServer(t, nil, 1<<20)
	for i := range maxConns {
		c, r := dialServer(t, sock)
		c.Write([]byte(`{"v":1,"id":1,"op":"call","tool":"x"}` + "\n"))
		if resp, err := r.ReadString('\n'); err != nil || !strings.Contains(resp, "ToolDenied") {
			t.Fatalf("connection %d: %q %v", i, resp, err)
		}
	}
	_, r := dialServer(t, sock)
	resp, err := r.ReadString('\n')
	if err != nil || !strings.Contains(resp, "LimitExceeded") || !strings.Contains(resp, "too many connections") {
		t.Fatalf("connection %d: %q %v, want a LimitExceeded answer", maxConns+1, resp, err)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("connection %d must then be closed: %v", maxConns+1, err)
	}
}

// shortDeadlines starts a server whose idle and line deadlines are short.
func shortDeadlines(t *testing.T, tools ToolHandler, idle, line time.Duration) (*runServer, string) {
	t.Helper()
	s := newRunServer(t.Context(), tools, nil, serverLimits{outBytes: 1 << 20})
	s.idle, s.line = idle, line
	sock := t.TempDir() + "/tools.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s.serve(ln)
	t.Cleanup(s.close)
	return s, sock
}

func TestSocketIdlePeerIsDropped(t *testing.T) {
	_, sock := shortDeadlines(t, nil, 200*time.Millisecond, time.Minute)
	_, r := dialServer(t, sock) // sends nothing
	start := time.Now()
	if b, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("an idle connection got %q %v, want it closed without an answer", b, err)
	}
	t.Logf("closed after %s", time.Since(start).Round(time.Millisecond))
}

func TestSocketSlowLineIsCut(t *testing.T) {
	_, sock := shortDeadlines(t, nil, time.Minute, 300*time.Millisecond)
	c, r := dialServer(t, sock)
	go func() { // one byte every 20 ms, never a newline: always active, never a request
		for i := 0; i < 500; i++ {
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	resp, err := r.ReadString('\n')
	if err != nil || !strings.Contains(resp, "not complete within") {
		t.Fatalf("got %q %v, want the line cut off", resp, err)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("the connection must then be closed: %v", err)
	}
}

func TestSocketPeerThatNeverReads(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)
	tools := func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return big, nil }
	s, sock := shortDeadlines(t, tools, time.Minute, 300*time.Millisecond)
	c, _ := dialServer(t, sock)
	go func() { // requests, never reading an answer: the server's writes block
		for i := 0; i < 64; i++ {
			if _, err := c.Write([]byte(`{"v":1,"id":1,"op":"call","tool":"big"}` + "\n")); err != nil {
				return
			}
		}
	}()
	conns := func() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.conns) }
	deadline := time.Now().Add(10 * time.Second)
	for conns() == 0 && time.Now().Before(deadline) { // accepted
		time.Sleep(5 * time.Millisecond)
	}
	for conns() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the server still holds a connection whose peer never reads")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPythonClientReconnectsAfterIdle: the host drops idle connections; the real client opens a new one.
func TestPythonClientReconnectsAfterIdle(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on the host")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wasmbox_tools.py"), toolsPy, 0o644)
	_, sock := shortDeadlines(t, func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"pong"`), nil
	}, 200*time.Millisecond, time.Minute)
	script := "import time, wasmbox_tools as tools\nprint(tools.ping())\ntime.sleep(0.8)\nprint(tools.ping())\n"
	cmd := exec.Command(py, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); exec(sys.argv[2])", dir, script)
	cmd.Env = []string{"WASMBOX_TOOLS_SOCKET=" + sock}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "pong\npong\n" {
		t.Fatalf("%v: %s", err, out)
	}
}
