package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
)

const testKey = "cli-test-key-0123456789"

// writeAuditLog writes a log of 2 calls (4 records) and returns its path.
func writeAuditLog(t *testing.T, key string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := governance.OpenAuditFile(path, governance.JSONLConfig{Key: []byte(key)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: a})
	if err != nil {
		t.Fatal(err)
	}
	run := g.NewRun("run-7")
	for _, tool := range []string{"search", "fetch"} {
		if _, err := run.Do(context.Background(), governance.Call{Tool: tool, Effect: governance.ReadOnly},
			func(context.Context, governance.Call) ([]byte, error) { return []byte("ok"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func runVerify(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = auditVerifyMain(append([]string{"verify"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAuditVerifyIntact(t *testing.T) {
	plain := writeAuditLog(t, "")
	if code, out, errOut := runVerify(plain); code != 0 || !strings.HasPrefix(out, "intact: 4 records\nhead: ") || errOut != "" {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}

	keyed := writeAuditLog(t, testKey)
	keyFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyFile, []byte(testKey+"\n"), 0o600)
	if code, out, _ := runVerify("--key-file", keyFile, keyed); code != 0 || !strings.HasPrefix(out, "intact: 4 records\nhead: ") {
		t.Fatalf("--key-file: code %d, stdout %q", code, out)
	}
	if code, out, _ := runVerify(keyed, "-key-file="+keyFile); code != 0 || !strings.HasPrefix(out, "intact: 4 records\nhead: ") {
		t.Fatalf("flag after the file: code %d, stdout %q", code, out)
	}
	t.Setenv("WASMBOX_AUDIT_KEY", testKey)
	if code, out, _ := runVerify("--key-env", "WASMBOX_AUDIT_KEY", keyed); code != 0 || !strings.HasPrefix(out, "intact: 4 records\nhead: ") {
		t.Fatalf("--key-env: code %d, stdout %q", code, out)
	}
	if code, out, _ := runVerify("--key-env", "WASMBOX_AUDIT_KEY", "--", keyed); code != 0 || !strings.HasPrefix(out, "intact: 4 records\nhead: ") {
		t.Fatalf("with --: code %d, stdout %q", code, out)
	}
}

func TestAuditVerifyTampered(t *testing.T) {
	path := writeAuditLog(t, testKey)
	data, _ := os.ReadFile(path)
	edited := bytes.Replace(data, []byte(`"tool":"fetch"`), []byte(`"tool":"fetcH"`), 1)
	os.WriteFile(path, edited, 0o600)
	t.Setenv("K", testKey)
	code, out, _ := runVerify("--key-env", "K", path)
	if code != 1 || !strings.Contains(out, `TAMPERED: first bad record at line 3 (run "run-7", seq 2)`) || !strings.Contains(out, "2 records before it are intact") {
		t.Fatalf("code %d, stdout %q", code, out)
	}

	// A wrong key fails at the first record.
	t.Setenv("K", "some-other-key-123456789")
	os.WriteFile(path, data, 0o600)
	if code, out, _ := runVerify("--key-env", "K", path); code != 1 || !strings.Contains(out, "line 1") {
		t.Fatalf("wrong key: code %d, stdout %q", code, out)
	}

	// A removed record.
	lines := bytes.SplitAfter(data, []byte("\n"))
	os.WriteFile(path, bytes.Join(append(lines[:1:1], lines[2:]...), nil), 0o600)
	t.Setenv("K", testKey)
	if code, out, _ := runVerify("--key-env", "K", path); code != 1 || !strings.Contains(out, "line 2") || !strings.Contains(out, "removed") {
		t.Fatalf("removed record: code %d, stdout %q", code, out)
	}
}

func TestAuditVerifyUsageErrors(t *testing.T) {
	plain := writeAuditLog(t, "")
	keyed := writeAuditLog(t, testKey)
	empty := filepath.Join(t.TempDir(), "empty-key")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", nil, "exactly one log file"},
		{"two files", []string{plain, plain}, "exactly one log file"},
		{"unknown flag", []string{"--key", "x", plain}, "flag provided but not defined"},
		{"both key flags", []string{"--key-file", empty, "--key-env", "X", plain}, "not both"},
		{"missing key file", []string{"--key-file", "/nonexistent/key", plain}, "reading the key"},
		{"empty key file", []string{"--key-file", empty, plain}, "empty"},
		{"unset key env", []string{"--key-env", "WASMBOX_SURELY_UNSET_VAR", plain}, "not set"},
		{"missing log", []string{"/nonexistent/audit.jsonl"}, "no such file"},
		{"keyed log without key", []string{keyed}, "HMAC-keyed"},
		{"flag without value", []string{plain, "--key-env"}, "flag needs an argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runVerify(tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
				t.Fatalf("code %d, stdout %q, stderr %q; want 2 and %q", code, out, errOut, tc.want)
			}
		})
	}
	if code, out, _ := runVerify("-h"); code != 0 || !strings.Contains(out, "usage: wasmbox audit verify") {
		t.Fatalf("-h: code %d, stdout %q", code, out)
	}
	// The dispatcher passes the arguments after "audit", starting with the subcommand.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "missing subcommand"},
		{[]string{"check", plain}, 2, `unknown subcommand "check"`},
		{[]string{plain}, 2, "unknown subcommand"},
		{[]string{"--help"}, 0, ""},
	} {
		var out, errOut bytes.Buffer
		if code := auditVerifyMain(tc.args, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Fatalf("%q: code %d, stderr %q", tc.args, code, errOut.String())
		}
	}
}

// Records cut from the end leave a valid shorter chain: only an anchor kept elsewhere (--head, --count) or a
// closing checkpoint (with the key) catches it.
func TestAuditVerifyHeadCatchesCutTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := governance.OpenAuditFile(path, governance.JSONLConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: a})
	if err != nil {
		t.Fatal(err)
	}
	run := g.NewRun("run-1")
	for i := 0; i < 3; i++ {
		run.Do(context.Background(), governance.Call{Tool: "search", Effect: governance.ReadOnly},
			func(context.Context, governance.Call) ([]byte, error) { return []byte("ok"), nil })
	}
	head, count := a.Anchor()
	a.Close()
	n := strconv.FormatInt(count, 10)
	if code, out, _ := runVerify("--head", head, "--count", n, path); code != 0 || out != "intact: 6 records\nhead: "+head+"\n" {
		t.Fatalf("intact log: code %d, stdout %q", code, out)
	}

	// The last call's two records are cut off.
	data, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(data, []byte("\n"))
	os.WriteFile(path, bytes.Join(lines[:4], nil), 0o600)
	if code, out, _ := runVerify(path); code != 0 {
		t.Fatalf("without an anchor a cut tail is not visible, yet: code %d, stdout %q", code, out)
	}
	for _, args := range [][]string{{"--head", head}, {"--count", n}, {"--head", head, "--count", n}} {
		code, out, _ := runVerify(append(args, path)...)
		if code != 1 || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, "cut from the end") {
			t.Fatalf("%q: code %d, stdout %q", args, code, out)
		}
	}
	for _, args := range [][]string{{"--head", "abc"}, {"--head", strings.ToUpper(head)}, {"--count", "-1"}, {"--count", "x"}} {
		if code, _, errOut := runVerify(append(args, path)...); code != 2 || errOut == "" {
			t.Fatalf("%q: code %d", args, code)
		}
	}

	// With a key and closing checkpoints, a cut tail fails without any anchor; a log continued after Close
	// verifies again once closed.
	kpath := filepath.Join(t.TempDir(), "keyed.jsonl")
	for i := 0; i < 2; i++ {
		ka, err := governance.OpenAuditFile(kpath, governance.JSONLConfig{Key: []byte(testKey), Checkpoint: true})
		if err != nil {
			t.Fatal(err)
		}
		kg, _ := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: ka})
		kg.NewRun("run-k").Do(context.Background(), governance.Call{Tool: "search", Effect: governance.ReadOnly},
			func(context.Context, governance.Call) ([]byte, error) { return []byte("ok"), nil })
		if err := ka.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("K", testKey)
	if code, out, _ := runVerify("--key-env", "K", kpath); code != 0 || !strings.HasPrefix(out, "intact: 6 records") {
		t.Fatalf("keyed log: code %d, stdout %q", code, out)
	}
	data, _ = os.ReadFile(kpath)
	lines = bytes.SplitAfter(data, []byte("\n"))
	os.WriteFile(kpath, bytes.Join(lines[:5], nil), 0o600)
	if code, out, _ := runVerify("--key-env", "K", kpath); code != 1 || !strings.Contains(out, "closing checkpoint") {
		t.Fatalf("cut keyed log: code %d, stdout %q", code, out)
	}
}
