package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
)

func cli(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRunExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"run", "-c", "print('hi')"}, 0, "hi\n"},
		{[]string{"run", "-c", "1/0"}, 1, ""},
		{[]string{"run", "-c", "import sys; sys.exit(7)"}, 7, ""},
		{[]string{"run", "--timeout", "200ms", "-c", "while True: pass"}, 124, ""},
		{[]string{"run"}, 2, ""},
		{[]string{"run", "-c", "x", "file.py"}, 2, ""},
		{[]string{"run", "--memory", "lots", "-c", "x"}, 2, ""},
		{[]string{"run", "--memory", "1MiB", "-c", "x"}, 2, ""},
		{[]string{"run", "--writeback", "-c", "x"}, 2, ""},
		{[]string{"bogus"}, 2, ""},
		{[]string{"run", "--env", "A=b", "-c", "import os; print(os.environ['A'])"}, 0, "b\n"},
	} {
		code, out, errs := cli(t, "", c.args...)
		if code != c.code || (c.out != "" && out != c.out) {
			t.Errorf("%v: exit %d stdout %q stderr %q; want %d %q", c.args, code, out, errs, c.code, c.out)
		}
	}
}

func TestRunStdinProgram(t *testing.T) {
	code, out, _ := cli(t, "print(6*7)", "run", "-")
	if code != 0 || out != "42\n" {
		t.Errorf("exit %d stdout %q", code, out)
	}
}

func TestRunJSON(t *testing.T) {
	code, out, _ := cli(t, "", "run", "--json", "-c", "print('x')\nopen('f.txt','w').write('y')\nraise KeyError('k')")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&v); err != nil || dec.More() {
		t.Fatalf("stdout is not exactly one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"stdout", "stderr", "exit_code", "duration_ms", "error", "files_changed", "tool_calls"} {
		if _, ok := v[k]; !ok {
			t.Errorf("missing key %s", k)
		}
	}
	e, _ := v["error"].(map[string]any)
	if v["stdout"] != "x\n" || v["exit_code"] != 1.0 || e["kind"] != "python" || e["type"] != "KeyError" {
		t.Errorf("got %v", v)
	}
	files, _ := v["files_changed"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["path"] != "f.txt" {
		t.Errorf("files_changed %v", v["files_changed"])
	}
	code, out, _ = cli(t, "", "run", "--json", "--timeout", "200ms", "-c", "sum(range(10**13))")
	if code != 124 || !strings.Contains(out, `"kind":"timeout"`) {
		t.Errorf("timeout: exit %d %s", code, out)
	}
}

func TestRunWorkspaceWriteback(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("data"), 0o644)
	code, out, errs := cli(t, "", "run", "--workspace", dir, "-c", "print(open('in.txt').read())\nopen('out.txt','w').write('new')")
	if code != 0 || out != "data\n" {
		t.Fatalf("exit %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); err == nil {
		t.Fatal("out.txt written back without --writeback")
	}
	code, _, errs = cli(t, "", "run", "--workspace", dir, "--writeback", "-c", "open('out.txt','w').write('new')")
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); code != 0 || string(b) != "new" {
		t.Fatalf("writeback: exit %d, %q %v %s", code, b, err, errs)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := cli(t, "", "version", "--json")
	var v struct {
		PythonVersion string `json:"python_version"`
		ABIVersion    int    `json:"abi_version"`
		SHA           string `json:"interpreter_sha256"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.PythonVersion != "3.13.5" || v.ABIVersion != 1 || len(v.SHA) != 64 {
		t.Errorf("exit %d %q", code, out)
	}
	var rts struct {
		Runtime  string `json:"runtime"`
		Runtimes []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"runtimes"`
	}
	if json.Unmarshal([]byte(out), &rts) != nil || rts.Runtime != "base" || len(rts.Runtimes) != 1 || rts.Runtimes[0].Name != "base" || rts.Runtimes[0].Description == "" {
		t.Errorf("runtimes: %q", out)
	}
}

// --runtime names a runtime this build does not link: a usage error that says where it comes from, before any
// interpreter starts.
func TestRuntimeFlag(t *testing.T) {
	for _, cmd := range [][]string{{"run", "--runtime", "sci", "-c", "print(1)"}, {"mcp", "--runtime", "sci"}, {"precompile", "--runtime", "sci", t.TempDir()}} {
		code, out, errs := cli(t, "", cmd...)
		if code != 2 || out != "" || !strings.Contains(errs, "github.com/wasmbox/wasmbox/sci") {
			t.Errorf("%v: exit %d stdout %q stderr %q", cmd, code, out, errs)
		}
	}
	if code, out, errs := cli(t, "", "run", "--runtime", "base", "-c", "print(6*7)"); code != 0 || out != "42\n" {
		t.Errorf("--runtime base: exit %d %q %q", code, out, errs)
	}
}

// A program's own exit code never impersonates the CLI's: 124 (timeout), 125 (wasmbox failed) and 2 (usage)
// become 1; the program's code stays in the JSON.
func TestRunExitCodeCollisions(t *testing.T) {
	for _, c := range []struct{ program, cli int }{{124, 1}, {125, 1}, {2, 1}, {3, 3}, {0, 0}} {
		code, _, errs := cli(t, "", "run", "-c", fmt.Sprintf("raise SystemExit(%d)", c.program))
		if code != c.cli {
			t.Errorf("SystemExit(%d): CLI exit %d, want %d (stderr %q)", c.program, code, c.cli, errs)
		}
		if c.cli != c.program && !strings.Contains(errs, fmt.Sprintf("exited with %d", c.program)) {
			t.Errorf("SystemExit(%d): stderr does not name the program's code: %q", c.program, errs)
		}
		code, out, _ := cli(t, "", "run", "--json", "-c", fmt.Sprintf("raise SystemExit(%d)", c.program))
		var v jsonResult
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		if code != c.cli || v.ExitCode != c.cli || v.ProgramExitCode != c.program {
			t.Errorf("SystemExit(%d) --json: exit %d, exit_code %d, program_exit_code %d", c.program, code, v.ExitCode, v.ProgramExitCode)
		}
	}
}

// The CLI's stdin reaches the program only with --stdin.
func TestRunStdinIsExplicit(t *testing.T) {
	prog := "import sys; print(repr(sys.stdin.read()))"
	if code, out, errs := cli(t, "secret", "run", "-c", prog); code != 0 || out != "''\n" {
		t.Errorf("without --stdin: exit %d, stdout %q, stderr %q; want an empty stdin", code, out, errs)
	}
	if code, out, errs := cli(t, "secret", "run", "--stdin", "-c", prog); code != 0 || out != "'secret'\n" {
		t.Errorf("with --stdin: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, _ := cli(t, "print(1)", "run", "--stdin", "-"); code != 2 {
		t.Errorf("--stdin with a program on stdin: exit %d, want 2", code)
	}
}

// Output past the limit is marked: on stderr in text mode, with flags in JSON.
func TestRunTruncationIsReported(t *testing.T) {
	code, out, errs := cli(t, "", "run", "--output-limit", "1KiB", "-c", "print('x'*5000)")
	if code != 0 || !strings.Contains(errs, "stdout truncated at 1KiB") {
		t.Errorf("exit %d, stderr %q: no truncation notice", code, errs)
	}
	if len(out) > 2048 {
		t.Errorf("stdout is %d bytes under a 1 KiB limit", len(out))
	}
	_, out, _ = cli(t, "", "run", "--json", "--output-limit", "1KiB", "-c", "print('x'*5000)")
	var v jsonResult
	if err := json.Unmarshal([]byte(out), &v); err != nil || !v.StdoutTruncated || v.StderrTruncated {
		t.Errorf("json: %v stdout_truncated=%v stderr_truncated=%v", err, v.StdoutTruncated, v.StderrTruncated)
	}
	if code, _, _ := cli(t, "", "run", "--output-limit", "0", "-c", "x"); code != 2 {
		t.Errorf("--output-limit 0: exit %d, want 2", code)
	}
}

// --writeback never copies out the workspace of a program stopped by its deadline.
func TestRunNoWritebackAfterTimeout(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := cli(t, "", "run", "--json", "--workspace", dir, "--writeback", "--timeout", "300ms", "-c",
		"open('partial.txt','w').write('half')\nwhile True: pass")
	if code != 124 {
		t.Fatalf("exit %d, want 124 (stderr %q)", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "partial.txt")); err == nil {
		t.Fatal("partial.txt was written back after a timeout")
	}
	var v jsonResult
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.WrittenBack {
		t.Fatalf("json: %v written_back=%v", err, v.WrittenBack)
	}
}

// The error kind comes from the host, not from the exception's name: a program raising MemoryError or
// ToolLimitExceeded itself is a Python failure.
func TestRunKindNotFromExceptionName(t *testing.T) {
	for _, typ := range []string{"MemoryError", "class ToolLimitExceeded(Exception): pass\nraise ToolLimitExceeded"} {
		prog := "raise " + typ
		if strings.Contains(typ, "\n") {
			prog = typ
		}
		_, out, _ := cli(t, "", "run", "--json", "-c", prog)
		var v jsonResult
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Error == nil || v.Error.Kind != "python" {
			t.Errorf("%q: kind %+v (%v), want python", prog, v.Error, err)
		}
	}
}

// --audit appends the run's tool-call records to a hash-chained log and reports its anchor; verify with that
// anchor passes on the log as written and fails once its last record is cut.
func TestRunAuditAnchor(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	code, out, errs := cli(t, "", "run", "--json", "--audit", log, "-c",
		"import tools\nfor i in range(3):\n    try: tools.call('no_such_tool')\n    except tools.ToolError as e: pass")
	var v jsonResult
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("exit %d, %v, %s %s", code, err, out, errs)
	}
	if len(v.AuditHead) != 64 || v.AuditRecords < 3 {
		t.Fatalf("audit_head %q, audit_records %d", v.AuditHead, v.AuditRecords)
	}
	count := fmt.Sprint(v.AuditRecords)
	if code, out, errs := cli(t, "", "audit", "verify", "--head", v.AuditHead, "--count", count, log); code != 0 {
		t.Fatalf("verify of the intact log: exit %d %s %s", code, out, errs)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	if err := os.WriteFile(log, []byte(strings.Join(lines[:len(lines)-1], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := cli(t, "", "audit", "verify", "--head", v.AuditHead, "--count", count, log); code == 0 {
		t.Fatal("verify with the run's anchor passed on a log whose last record was cut")
	}
	// A second run continues the same chain.
	_, out, _ = cli(t, "", "run", "--json", "--audit", log, "-c", "import tools\ntry: tools.call('x')\nexcept tools.ToolError: pass")
	var v2 jsonResult
	if err := json.Unmarshal([]byte(out), &v2); err != nil || v2.AuditRecords <= v.AuditRecords-1 {
		t.Fatalf("second run: %v, audit_records %d", err, v2.AuditRecords)
	}
}

// --writeback refuses hidden paths such as .git (git runs hooks and configured commands from there) and
// execute bits unless asked, reports what it refused, and applies deletions only with --writeback-delete.
func TestRunWritebackRules(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(dir, ".git", "config"), []byte("[core]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "old.txt"), []byte("keep?"), 0o644)
	prog := `import os
with open('.git/config', 'a') as f: f.write('\tfsmonitor = touch /tmp/pwned\n')
open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\necho pwned\n')
os.remove('old.txt')
open('ok.txt', 'w').write('fine')`
	code, out, errs := cli(t, "", "run", "--json", "--workspace", dir, "--writeback", "-c", prog)
	var v jsonResult
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("exit %d %v %s", code, err, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed on the host: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "hooks", "pre-commit")); err == nil {
		t.Error(".git/hooks/pre-commit was written on the host")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ok.txt")); string(b) != "fine" {
		t.Errorf("ok.txt: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "old.txt")); err != nil {
		t.Error("old.txt deleted without --writeback-delete")
	}
	if v.WriteBack == nil || len(v.WriteBack.Refused) < 2 || len(v.WriteBack.NotDeleted) != 1 {
		t.Errorf("writeback report %+v", v.WriteBack)
	}
	if !strings.Contains(errs, "writeback refused .git/config") {
		t.Errorf("stderr does not name the refused path: %q", errs)
	}
	code, _, errs = cli(t, "", "run", "--workspace", dir, "--writeback", "--writeback-delete", "-c", "import os; os.remove('old.txt')")
	if _, err := os.Stat(filepath.Join(dir, "old.txt")); code != 0 || err == nil {
		t.Errorf("--writeback-delete: exit %d, old.txt still there (%s)", code, errs)
	}
	if code, _, _ := cli(t, "", "run", "--writeback-delete", "-c", "x"); code != 2 {
		t.Errorf("--writeback-delete without --writeback: exit %d, want 2", code)
	}
}

// Off a terminal, the one-time compile gets a single note on stderr, naming the cache; nothing else is printed.
func TestCompileProgressNote(t *testing.T) {
	var buf bytes.Buffer
	p := compileProgress(&buf, "/some/cache")
	p(wasmbox.CompileEvent{Module: "interpreter"})
	p(wasmbox.CompileEvent{Module: "interpreter", Done: true})
	p(wasmbox.CompileEvent{Module: "snapshot module"})
	p(wasmbox.CompileEvent{Module: "snapshot module", Done: true})
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "compiling the interpreter once") || !strings.Contains(out, "/some/cache") {
		t.Fatalf("stderr %q: want one note naming the cache", out)
	}
}

func TestPrecompileUsage(t *testing.T) {
	if code, _, _ := cli(t, "", "precompile"); code != exitUsage {
		t.Errorf("precompile without DIR: exit %d", code)
	}
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o600)
	if code, _, errs := cli(t, "", "precompile", full); code != exitFailure || !strings.Contains(errs, "not empty") {
		t.Errorf("precompile into a full directory: exit %d, %q", code, errs)
	}
	t.Setenv("WASMBOX_CACHE_MAX", "lots")
	if code, _, errs := cli(t, "", "run", "-c", "print(1)"); code != exitUsage || !strings.Contains(errs, "WASMBOX_CACHE_MAX") {
		t.Errorf("a bad WASMBOX_CACHE_MAX: exit %d, %q", code, errs)
	}
}
