package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests of this file are the CLI's part of the hostile corpus: what a guest program did to the CLI's own
// messages and to the host directory --writeback writes.

// TestHostileWritebackAfterException: --writeback used to copy out the workspace of a program that ended in an
// uncaught exception (overwriting host files with what a failing program left), while its help said "after a
// run that ended normally". Now it does so only with --writeback-on-error; a timeout never writes back.
func TestHostileWritebackAfterException(t *testing.T) {
	for _, prog := range []string{
		"open('keep.txt','w').write('clobbered')\nraise ValueError('boom')",
		"import sys\nopen('keep.txt','w').write('clobbered')\nsys.exit(3)",
	} {
		dir := t.TempDir()
		keep := filepath.Join(dir, "keep.txt")
		os.WriteFile(keep, []byte("original"), 0o644)
		code, out, errs := cli(t, "", "run", "--json", "--workspace", dir, "--writeback", "-c", prog)
		if code == 0 {
			t.Fatalf("%q: exit 0", prog)
		}
		if b, _ := os.ReadFile(keep); string(b) != "original" {
			t.Errorf("%q: keep.txt written back after the program failed: %q", prog, b)
		}
		var v jsonResult
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.WrittenBack {
			t.Errorf("%q: json %v written_back=%v", prog, err, v.WrittenBack)
		}
		_, _, errs = cli(t, "", "run", "--workspace", dir, "--writeback", "-c", prog)
		if !strings.Contains(errs, "--writeback-on-error") {
			t.Errorf("%q: stderr does not say why nothing was written back: %q", prog, errs)
		}
		if _, _, errs := cli(t, "", "run", "--workspace", dir, "--writeback", "--writeback-on-error", "-c", prog); true {
			if b, _ := os.ReadFile(keep); string(b) != "clobbered" {
				t.Errorf("%q with --writeback-on-error: keep.txt %q (%s)", prog, b, errs)
			}
		}
	}
	if code, _, _ := cli(t, "", "run", "--writeback-on-error", "-c", "x"); code != 2 {
		t.Errorf("--writeback-on-error without --writeback: exit %d, want 2", code)
	}
}

// TestHostileWritebackPathsEscaped: the CLI printed guest-chosen paths raw in its writeback report, so a
// program could erase lines, forge a "wasmbox:" line, set the title or write the clipboard (OSC 52).
func TestHostileWritebackPathsEscaped(t *testing.T) {
	dir := t.TempDir()
	prog := `import os
os.makedirs(".x\x1b]52;c;cHduZWQ=\x07", exist_ok=True)
open(".x\x1b]52;c;cHduZWQ=\x07/f", "w").write("1")
open(".evil\r\x1b[2Kwasmbox: all good\x1b]0;title\x07", "w").write("1")
os.remove("gone\x1b[1A")
`
	os.WriteFile(filepath.Join(dir, "gone\x1b[1A"), []byte("x"), 0o644)
	_, _, errs := cli(t, "", "run", "--workspace", dir, "--writeback", "-c", prog)
	if strings.ContainsAny(errs, "\x1b\x07\r") {
		t.Fatalf("stderr carries terminal controls: %q", errs)
	}
	for _, want := range []string{`writeback refused .evil\u000d\u001b[2Kwasmbox: all good`, `gone\u001b[1A`} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %q", want, errs)
		}
	}
}

// TestHostileWritebackErrorKeepsTheRun: when --writeback failed, --json printed an object with stdout,
// files_changed, tool_calls and run_id emptied. The object now describes the run, with writeback_error.
func TestHostileWritebackErrorKeepsTheRun(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("host file"), 0o644)
	// The program turns the file a into a directory: without --writeback-delete the host file stays, and the
	// directory cannot be written over it.
	code, out, errs := cli(t, "", "run", "--json", "--workspace", dir, "--writeback", "-c",
		"import os\nos.remove('a'); os.mkdir('a'); open('a/b','w').write('x')\nprint('ran')")
	var v jsonResult
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("json: %v: %s", err, out)
	}
	if code != exitFailure || v.ExitCode != exitFailure {
		t.Errorf("exit %d (json %d), want %d", code, v.ExitCode, exitFailure)
	}
	if v.Stdout != "ran\n" || v.RunID == "" || len(v.FilesChanged) == 0 || v.ToolCalls == nil || v.Error != nil {
		t.Errorf("the run is not described: %+v", v)
	}
	if v.WrittenBack || !strings.Contains(v.WriteBackError, "not a directory") {
		t.Errorf("writeback: written_back=%v error %q", v.WrittenBack, v.WriteBackError)
	}
	if !strings.Contains(errs, "wasmbox: writeback failed") {
		t.Errorf("stderr %q", errs)
	}
}
