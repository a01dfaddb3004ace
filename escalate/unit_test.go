package escalate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Tests that need no engine: the run socket's protocol (spoken by the real Python client on the host), job
// validation, policies.

func startServer(t *testing.T, tools ToolHandler, maxOut int64) (*runServer, string) {
	return startServerIn(t, tools, nil, serverLimits{outBytes: maxOut})
}

// startServerIn starts a server for a run with input files in.
func startServerIn(t *testing.T, tools ToolHandler, in map[string][]byte, lim serverLimits) (*runServer, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "tools.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := newRunServer(t.Context(), tools, in, lim)
	s.serve(ln)
	t.Cleanup(s.close)
	return s, sock
}

// exchange sends request lines on one connection and returns the response lines.
func exchange(t *testing.T, sock string, lines ...string) []string {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	var out []string
	for _, l := range lines {
		if _, err := c.Write([]byte(l + "\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", l, err)
		}
		out = append(out, strings.TrimSuffix(resp, "\n"))
	}
	return out
}

func TestSocketProtocol(t *testing.T) {
	tools := func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
		switch tool {
		case "echo":
			return args, nil
		case "nil":
			return nil, nil
		case "bad-json":
			return json.RawMessage("{"), nil
		case "panic":
			panic("oops")
		case "limit":
			return nil, &ToolError{Type: "ToolLimitExceeded", Message: "max_tool_calls"}
		}
		return nil, errors.New("unknown tool")
	}
	_, sock := startServer(t, tools, 1<<20)
	got := exchange(t, sock,
		`{"v":1,"id":1,"op":"call","tool":"echo","args":{"a":[1,2]}}`,
		`{"v":1,"id":2,"op":"call","tool":"nil"}`,
		`{"v":1,"id":3,"op":"call","tool":"bad-json","args":{}}`,
		`{"v":1,"id":4,"op":"call","tool":"panic","args":{}}`,
		`{"v":1,"id":5,"op":"call","tool":"limit","args":{}}`,
		`{"v":1,"id":6,"op":"call","tool":"echo","args":[1]}`,
		`{"v":2,"id":7,"op":"call","tool":"echo"}`,
		`not json`,
		`{"v":1,"id":9,"op":"rm -rf"}`,
		`{"v":1,"id":10,"op":"call","tool":"other","args":{}}`,
	)
	want := []string{
		`{"id":1,"ok":true,"result":{"a":[1,2]}}`,
		`{"id":2,"ok":true,"result":null}`,
		`{"id":3,"ok":false,"error":{"type":"ToolError","message":"tool \"bad-json\" returned invalid JSON"}}`,
		`{"id":4,"ok":false,"error":{"type":"ToolError","message":"tool \"panic\" panicked: oops"}}`,
		`{"id":5,"ok":false,"error":{"type":"ToolLimitExceeded","message":"max_tool_calls"}}`,
		`{"id":6,"ok":false,"error":{"type":"ToolError","message":"arguments must be a JSON object"}}`,
		`{"id":7,"ok":false,"error":{"type":"ProtocolError","message":"protocol version 2 not supported (want 1)"}}`,
		`{"id":0,"ok":false,"error":{"type":"ProtocolError","message":"request is not valid JSON"}}`,
		`{"id":9,"ok":false,"error":{"type":"ProtocolError","message":"unknown op \"rm -rf\""}}`,
		`{"id":10,"ok":false,"error":{"type":"ToolError","message":"unknown tool"}}`,
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("response %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

func TestSocketLineTooLong(t *testing.T) {
	_, sock := startServer(t, nil, 1<<20)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write([]byte(strings.Repeat("x", maxLineBytes+10) + "\n"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(resp, "request line too long") {
		t.Fatalf("got %q", resp)
	}
}

func TestSocketWorkspaceTransfer(t *testing.T) {
	in := map[string][]byte{"same.txt": []byte("same"), "old.txt": []byte("x")}
	s, sock := startServerIn(t, nil, in, serverLimits{outBytes: 32}) // 24 bytes of data and paths below
	got := exchange(t, sock,
		`{"v":1,"id":1,"op":"file","path":"a/b.txt","data":"aGVs"}`, // "hel"
		`{"v":1,"id":2,"op":"file","path":"a/b.txt","append":true,"data":"bG8="}`,
		`{"v":1,"id":3,"op":"file","path":"../escape","data":""}`,
		`{"v":1,"id":4,"op":"file","path":"/abs","data":""}`,
		`{"v":1,"id":5,"op":"file","path":"c.txt","append":true,"data":""}`,
		`{"v":1,"id":6,"op":"file","path":"same.txt","data":"c2FtZQ=="}`,
		`{"v":1,"id":7,"op":"delete","path":"old.txt"}`,
		`{"v":1,"id":8,"op":"delete","path":"never-there.txt"}`,
		`{"v":1,"id":9,"op":"done"}`,
	)
	for i, r := range got {
		ok := strings.Contains(r, `"ok":true`)
		if want := i != 2 && i != 3 && i != 4; ok != want {
			t.Errorf("response %d: %s", i+1, r)
		}
	}
	files, changes, complete := s.changes(in)
	if !complete || len(files) != 1 || string(files["a/b.txt"]) != "hello" {
		t.Fatalf("files %q complete %v", files, complete)
	}
	if want := "[{a/b.txt created 5} {old.txt deleted 0}]"; fmtChanges(changes) != want {
		t.Errorf("changes %s, want %s", fmtChanges(changes), want)
	}
	// Over the limit (32 bytes): the transfer is cut off and reported incomplete.
	got = exchange(t, sock, `{"v":1,"id":1,"op":"file","path":"big","data":"MDEyMzQ1Njc4OQ=="}`)
	if !strings.Contains(got[0], "LimitExceeded") {
		t.Fatalf("got %s", got[0])
	}
	if _, _, complete := s.changes(nil); complete {
		t.Error("a cut-off transfer must not be complete")
	}
}

func fmtChanges(c []FileChange) string {
	var parts []string
	for _, x := range c {
		parts = append(parts, "{"+x.Path+" "+x.Kind+" "+itoa(x.Size)+"}")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestPythonClient runs the real wasmbox_tools module with the host's python3 against the server.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on the host")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wasmbox_tools.py"), toolsPy, 0o644)
	_, sock := startServer(t, func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
		switch tool {
		case "greet":
			var a struct{ Name string }
			json.Unmarshal(args, &a)
			return json.Marshal(map[string]any{"greeting": "hi " + a.Name, "n": []int{1, 2}})
		case "approve":
			return nil, &ToolError{Type: "ApprovalTimeout", Message: "nobody answered"}
		case "weird":
			return nil, &ToolError{Type: "SomethingNew", Message: "?"}
		}
		return nil, errors.New("failed: " + tool)
	}, 0)
	script := `
import wasmbox_tools as tools
print(tools.call("greet", name="bob"))
print(tools.greet({"name": "ann"}))
for name, exc in [("approve", tools.ApprovalTimeout), ("approve", tools.ToolDenied), ("weird", tools.ToolException), ("x", tools.ToolError)]:
    try:
        tools.call(name)
    except exc as e:
        print(name, type(e).__name__, e.type, e.tool, str(e))
try:
    tools.call("greet", {"a": 1}, b=2)
except TypeError as e:
    print("TypeError")
`
	cmd := exec.Command(py, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); exec(sys.argv[2])", dir, script)
	cmd.Env = []string{"WASMBOX_TOOLS_SOCKET=" + sock}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := `{'greeting': 'hi bob', 'n': [1, 2]}
{'greeting': 'hi ann', 'n': [1, 2]}
approve ApprovalTimeout ApprovalTimeout approve nobody answered
approve ApprovalTimeout ApprovalTimeout approve nobody answered
weird ToolError SomethingNew weird ?
x ToolError ToolError x failed: x
TypeError
`
	if string(out) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestPrepareValidates(t *testing.T) {
	for name, j := range map[string]Job{
		"no image":        {Code: "1"},
		"no program":      {Image: "i"},
		"code and argv":   {Image: "i", Code: "1", Argv: []string{"x"}},
		"empty argv0":     {Image: "i", Argv: []string{""}},
		"dotdot":          {Image: "i", Code: "1", Files: map[string][]byte{"../x": nil}},
		"absolute":        {Image: "i", Code: "1", Files: map[string][]byte{"/etc/x": nil}},
		"bad env":         {Image: "i", Code: "1", Env: map[string]string{"A=B": "c"}},
		"negative":        {Image: "i", Code: "1", Limits: Limits{Pids: -1}},
		"tiny memory":     {Image: "i", Code: "1", Limits: Limits{Memory: 1 << 20}},
		"direct and code": {Image: "i", Code: "1", Direct: true},
		"too many bytes":  {Image: "i", Code: "1", Files: map[string][]byte{"a": make([]byte, 2048)}, Limits: Limits{WorkspaceBytes: 1024}},
	} {
		if _, err := prepare(j); !errors.Is(err, ErrInvalidJob) {
			t.Errorf("%s: err = %v, want ErrInvalidJob", name, err)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	if _, err := prepare(Job{Image: "i", Code: "1", Dir: dir}); !errors.Is(err, ErrInvalidJob) {
		t.Errorf("a symlink in Dir: err = %v", err)
	}
	env := map[string]string{"A": "1"}
	j, err := prepare(Job{Image: "i", Code: "1", Env: env, Files: map[string][]byte{"./a//b": []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	j.Env["B"] = "2"
	if len(env) != 1 {
		t.Error("prepare must copy the caller's maps")
	}
	if _, ok := j.files["a/b"]; !ok || j.Limits.Memory != DefaultMemory || j.Limits.Pids != DefaultPids ||
		j.Limits.FilesOutBytes != DefaultWorkspaceBytes || j.Python != "python3" {
		t.Errorf("defaults/paths not applied: %+v %v", j.Limits, sortedKeys(j.files))
	}
}

func TestPolicy(t *testing.T) {
	ctx := context.Background()
	job := Job{Image: "wasmbox-python:3.11", Code: "1"}
	if err := Allowed(ctx, nil, job); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("nil policy: %v", err)
	}
	if err := Allowed(ctx, AllowImages("wasmbox-python:3.11"), job); err != nil {
		t.Errorf("allowed image: %v", err)
	}
	if err := Allowed(ctx, AllowImages("other"), job); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("other image: %v", err)
	}
	panicky := PolicyFunc(func(context.Context, Job) error { panic("bug") })
	if err := Allowed(ctx, panicky, job); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("panicking policy: %v", err)
	}
	ran := false
	b := WithPolicy(fakeBackend{&ran}, AllowImages("nope"))
	if _, err := b.Run(ctx, job); !errors.Is(err, ErrNotAllowed) || ran {
		t.Errorf("WithPolicy: err %v ran %v", err, ran)
	}
}

type fakeBackend struct{ ran *bool }

func (f fakeBackend) Run(context.Context, Job) (*Result, error) { *f.ran = true; return &Result{}, nil }
func (fakeBackend) Name() string                                { return "fake" }
func (fakeBackend) Close() error                                { return nil }

func TestResultErr(t *testing.T) {
	if (&Result{}).Err() != nil {
		t.Error("exit 0 must be nil")
	}
	err := (&Result{ExitCode: 137, OOMKilled: true}).Err()
	var ee *ExitError
	if !errors.Is(err, ErrOOM) || !errors.Is(err, ErrExit) || !errors.As(err, &ee) || ee.Code != 137 {
		t.Errorf("OOM: %v", err)
	}
	if errors.Is((&Result{ExitCode: 1}).Err(), ErrOOM) {
		t.Error("exit 1 is not OOM")
	}
}

func TestCappedBuffer(t *testing.T) {
	c := &cappedBuffer{limit: 5}
	c.Write([]byte("abc"))
	c.Write([]byte("defgh"))
	s, trunc := c.result()
	if !trunc || !strings.HasPrefix(s, "abcde\n[escalate: output truncated: 3 more bytes dropped]") {
		t.Errorf("%q %v", s, trunc)
	}
}

func TestBridgeTools(t *testing.T) {
	h := BridgeTools(func(ctx context.Context, tool string, args json.RawMessage) ([]byte, bool) {
		switch tool {
		case "ok":
			return []byte(`{"x":1}`), false
		case "denied":
			return []byte(`{"type":"BudgetExceeded","message":"no budget"}`), true
		}
		return []byte("not json"), true
	})
	if out, err := h(t.Context(), "ok", nil); err != nil || string(out) != `{"x":1}` {
		t.Errorf("ok: %s %v", out, err)
	}
	var te *ToolError
	if _, err := h(t.Context(), "denied", nil); !errors.As(err, &te) || te.Type != "BudgetExceeded" || te.Message != "no budget" {
		t.Errorf("denied: %v", err)
	}
	if _, err := h(t.Context(), "garbled", nil); !errors.As(err, &te) || te.Type != "ToolError" || te.Message != "not json" {
		t.Errorf("garbled: %v", err)
	}
}
