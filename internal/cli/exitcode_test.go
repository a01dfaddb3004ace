package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIExitCodeRange: the program's code passes through unless it is one the CLI reserves (2, 124, 125) or
// outside 0..255, which become 1; each edge is checked (mutation testing moved them unnoticed).
func TestCLIExitCodeRange(t *testing.T) {
	for program, want := range map[int]int{0: 0, 1: 1, 2: exitRemapped, 3: 3, 123: 123, 124: exitRemapped,
		125: exitRemapped, 126: 126, 255: 255, 256: exitRemapped, -1: exitRemapped, 1 << 20: exitRemapped} {
		got, remapped := cliExitCode(program)
		if got != want || remapped != (want != program) {
			t.Errorf("cliExitCode(%d) = %d, %v; want %d", program, got, remapped, want)
		}
	}
	// Through the CLI: a program exiting with 124 would look like a timeout; the CLI reports 1 and says why.
	if code, _, errs := cli(t, "", "run", "-c", "import sys; sys.exit(124)"); code != exitRemapped || !strings.Contains(errs, "reserves") {
		t.Errorf("sys.exit(124): exit %d, %q", code, errs)
	}
}

// TestCLIInternalErrorIs125: a failure of wasmbox itself (here a precompiled directory that does not exist)
// exits 125, in text and JSON modes, never a code a program could also have chosen.
func TestCLIInternalErrorIs125(t *testing.T) {
	t.Setenv("WASMBOX_PRECOMPILED", filepath.Join(t.TempDir(), "missing"))
	if code, _, errs := cli(t, "", "run", "-c", "print(1)"); code != exitFailure {
		t.Errorf("text mode: exit %d, want %d (%s)", code, exitFailure, errs)
	}
	if code, out, _ := cli(t, "", "run", "--json", "-c", "print(1)"); code != exitFailure || !strings.Contains(out, `"kind":"internal"`) {
		t.Errorf("json mode: exit %d, %s", code, out)
	}
}

// TestCLIConventions: a subcommand's --help exits 0 as the top-level help does; a --workspace that is missing
// or not a directory is a usage error (2) that names the path, not a failure of wasmbox (125).
func TestCLIConventions(t *testing.T) {
	for _, sub := range [][]string{{"run", "--help"}, {"mcp", "-h"}, {"version", "--help"}, {"precompile", "--help"}, {"audit", "verify", "--help"}} {
		if code, _, _ := cli(t, "", sub...); code != 0 {
			t.Errorf("%v: exit %d, want 0", sub, code)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		code, _, errs := cli(t, "", "run", "--workspace", dir, "-c", "print(1)")
		if code != exitUsage || !strings.Contains(errs, dir) {
			t.Errorf("--workspace %s: exit %d, %q", dir, code, errs)
		}
	}
}
