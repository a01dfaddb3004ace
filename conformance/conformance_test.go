package conformance

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/wasmbox"
)

//go:embed runner.py
var runnerSrc string

// Limits of one module's run in the sandbox: generous, since CPython's tests are heavier than model code.
const (
	sandboxTimeout   = 20 * time.Minute
	sandboxMemory    = 1 << 30
	workspaceBytes   = 512 << 20
	workspaceFiles   = 20_000
	nativeTimeout    = 20 * time.Minute
	resultsFile      = ".conformance-results.jsonl"
	expectationsFile = "expectations.txt"
	modulesFile      = "modules.txt"
)

// outcome is one test's result, or a module's when it did not run (ID "-").
type outcome struct{ Status, Msg string }

type moduleResult struct {
	Module    string
	ModStatus string // "" when the module ran; else module-skip, needs-test-module, import-error, timeout, crash
	ModMsg    string
	Tests     map[string]outcome
	Seconds   float64
	Done      bool
	Version   string // the interpreter's version, from the runner's last line
}

func (m *moduleResult) counts() (tests, pass, skip, fail int) {
	for _, o := range m.Tests {
		tests++
		switch o.Status {
		case "pass":
			pass++
		case "skip":
			skip++
		default:
			fail++
		}
	}
	return
}

// parseResults reads the runner's JSON lines. A run that ended early (no "done" line) keeps what it recorded.
func parseResults(module string, data []byte) moduleResult {
	r := moduleResult{Module: module, Tests: map[string]outcome{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			ID, Module, Status, Msg, Version string
			Done                             bool
			Seconds                          float64
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch {
		case line.Done:
			r.Done, r.Seconds, r.Version = true, line.Seconds, line.Version
		case line.Module != "":
			r.ModStatus, r.ModMsg = line.Status, line.Msg
		case line.ID != "":
			r.Tests[line.ID] = outcome{line.Status, line.Msg}
		}
	}
	return r
}

type module struct {
	Name string
	CI   bool
}

// loadModules reads modules.txt: one module per line, "ci" after it when the CI subset runs it too.
func loadModules(path string) ([]module, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []module
	for i, line := range strings.Split(string(b), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case len(f) > 2 || (len(f) == 2 && f[1] != "ci") || !strings.HasPrefix(f[0], "test_"):
			return nil, fmt.Errorf("%s:%d: want \"test_name [ci]\", got %q", path, i+1, line)
		}
		out = append(out, module{f[0], len(f) == 2})
	}
	return out, nil
}

type expectation struct{ Module, Status, ID, Reason string }

func expKey(module, id string) string { return module + "\x00" + id }

// loadExpectations reads expectations.txt: tab-separated module, status, test id ("-" for the module itself) and
// reason. Status is skip or fail for a test; module-skip, needs-test-module, import-error, timeout or crash for a
// module that did not run to its end; "any" for a test whose outcome varies between runs.
func loadExpectations(path string) (map[string]expectation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return map[string]expectation{}, nil
		}
		return nil, err
	}
	out := map[string]expectation{}
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, "\t", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 tab-separated fields (module, status, test, reason)", path, i+1)
		}
		e := expectation{f[0], f[1], f[2], f[3]}
		switch e.Status {
		case "skip", "fail", "any", "module-skip", "needs-test-module", "import-error", "timeout", "crash":
		default:
			return nil, fmt.Errorf("%s:%d: unknown status %q", path, i+1, e.Status)
		}
		if strings.TrimSpace(e.Reason) == "" {
			return nil, fmt.Errorf("%s:%d: %s %s has no reason", path, i+1, e.Status, e.ID)
		}
		k := expKey(e.Module, e.ID)
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", path, i+1, e.ID)
		}
		out[k] = e
	}
	return out, nil
}

// compare lists every difference between a module's sandbox results and the expectations: unexpected failures
// and skips, expected ones that now pass or changed, and expected tests that no longer ran.
func compare(r *moduleResult, exp map[string]expectation) []string {
	var diffs []string
	modExp, hasModExp := exp[expKey(r.Module, "-")]
	switch {
	case r.ModStatus != "" && !hasModExp:
		diffs = append(diffs, fmt.Sprintf("%s: unexpected %s: %s", r.Module, r.ModStatus, r.ModMsg))
	case r.ModStatus != "" && modExp.Status != r.ModStatus:
		diffs = append(diffs, fmt.Sprintf("%s: %s (expected %s: %s): %s", r.Module, r.ModStatus, modExp.Status, modExp.Reason, r.ModMsg))
	case r.ModStatus == "" && hasModExp:
		diffs = append(diffs, fmt.Sprintf("%s: now runs to its end (expected %s: %s)", r.Module, modExp.Status, modExp.Reason))
	}
	ids := make([]string, 0, len(r.Tests))
	for id := range r.Tests {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		o := r.Tests[id]
		e, ok := exp[expKey(r.Module, id)]
		switch {
		case ok && e.Status == "any":
		case o.Status == "pass" && ok:
			diffs = append(diffs, fmt.Sprintf("%s: now passes (expected %s: %s)", id, e.Status, e.Reason))
		case o.Status != "pass" && !ok:
			diffs = append(diffs, fmt.Sprintf("%s: unexpected %s: %s", id, o.Status, o.Msg))
		case o.Status != "pass" && e.Status != o.Status:
			diffs = append(diffs, fmt.Sprintf("%s: %s (expected %s: %s): %s", id, o.Status, e.Status, e.Reason, o.Msg))
		}
	}
	if r.Done && (r.ModStatus == "" || r.ModStatus == "module-skip") {
		var missing []string
		for _, e := range exp {
			if e.Module == r.Module && e.ID != "-" {
				if _, ran := r.Tests[e.ID]; !ran {
					missing = append(missing, e.ID)
				}
			}
		}
		sort.Strings(missing)
		for _, id := range missing {
			diffs = append(diffs, fmt.Sprintf("%s: expected %s but it did not run", id, exp[expKey(r.Module, id)].Status))
		}
	}
	return diffs
}

// updated returns the expectations with every entry of the modules in results replaced by what they did now.
// An entry whose test and status did not change keeps its reason (so reasons written by hand survive); a new one
// gets the test's own message, and how the test did natively when that is known.
func updated(old map[string]expectation, results []*moduleResult, native map[string]*moduleResult) []expectation {
	ran := map[string]bool{}
	for _, r := range results {
		ran[r.Module] = true
	}
	var out []expectation
	for _, e := range old {
		if !ran[e.Module] {
			out = append(out, e)
		}
	}
	reason := func(module, id, status, msg string) string {
		if e, ok := old[expKey(module, id)]; ok && (e.Status == status || e.Status == "any") {
			return e.Reason
		}
		msg = strings.ReplaceAll(msg, "\t", " ")
		if msg == "" {
			msg = status
		}
		if n := native[module]; n != nil && id != "-" {
			if no, ok := n.Tests[id]; ok {
				msg += " [native: " + no.Status + "]"
			} else if n.Done {
				msg += " [native: not run]"
			}
		}
		return msg
	}
	for _, r := range results {
		if r.ModStatus != "" {
			out = append(out, expectation{r.Module, r.ModStatus, "-", reason(r.Module, "-", r.ModStatus, r.ModMsg)})
		}
		for id, o := range r.Tests {
			if o.Status == "pass" {
				continue
			}
			st := o.Status
			if e, ok := old[expKey(r.Module, id)]; ok && e.Status == "any" {
				st = "any"
			}
			out = append(out, expectation{r.Module, st, id, reason(r.Module, id, o.Status, o.Msg)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func writeExpectations(path string, exps []expectation) error {
	var b strings.Builder
	b.WriteString("# Expected non-passing outcomes of the conformance run in the sandbox (conformance/README.md).\n")
	b.WriteString("# module<TAB>status<TAB>test id (- for the module)<TAB>reason. Regenerate: make conformance-update\n")
	for _, e := range exps {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", e.Module, e.Status, e.ID, e.Reason)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// table renders the per-module counts, sandbox against native, as markdown.
func table(mods []module, sandbox, native map[string]*moduleResult) string {
	var b strings.Builder
	b.WriteString("| module | tests | pass | skip | fail | native tests | native pass | native skip | native fail | sandbox-only fail | sandbox s | native s |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var tot [9]int
	var totS, totN float64
	cell := func(r *moduleResult) (string, [4]int) {
		if r == nil {
			return "| – | – | – | – ", [4]int{}
		}
		t, p, s, f := r.counts()
		note := ""
		if r.ModStatus != "" {
			note = " (" + r.ModStatus + ")"
		}
		return fmt.Sprintf("| %d%s | %d | %d | %d ", t, note, p, s, f), [4]int{t, p, s, f}
	}
	for _, m := range mods {
		s, n := sandbox[m.Name], native[m.Name]
		sc, sv := cell(s)
		nc, nv := cell(n)
		only := 0
		if s != nil && n != nil {
			for id, o := range s.Tests {
				if o.Status == "fail" && n.Tests[id].Status == "pass" {
					only++
				}
			}
			if (s.ModStatus == "import-error" || s.ModStatus == "timeout" || s.ModStatus == "crash") && n.ModStatus == "" {
				only += len(n.Tests) // the whole module fails in the sandbox only
			}
		}
		secs := func(r *moduleResult) string {
			if r == nil {
				return "–"
			}
			return fmt.Sprintf("%.1f", r.Seconds)
		}
		fmt.Fprintf(&b, "| %s %s%s| %d | %s | %s |\n", m.Name, sc, nc, only, secs(s), secs(n))
		for i := range 4 {
			tot[i] += sv[i]
			tot[4+i] += nv[i]
		}
		tot[8] += only
		if s != nil {
			totS += s.Seconds
		}
		if n != nil {
			totN += n.Seconds
		}
	}
	fmt.Fprintf(&b, "| **total** (%d modules) | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.0f | %.0f |\n",
		len(mods), tot[0], tot[1], tot[2], tot[3], tot[4], tot[5], tot[6], tot[7], tot[8], totS, totN)
	versions := func(rs map[string]*moduleResult) string {
		seen := map[string]bool{}
		for _, r := range rs {
			if r.Version != "" {
				seen[r.Version] = true
			}
		}
		var v []string
		for k := range seen {
			v = append(v, k)
		}
		sort.Strings(v)
		if len(v) == 0 {
			return "–"
		}
		return strings.Join(v, ", ")
	}
	fmt.Fprintf(&b, "\nsandbox: CPython %s (wasmbox); native: CPython %s. \"sandbox-only fail\" counts tests that fail in the sandbox and pass natively, and the native tests of a module that cannot be imported in the sandbox.\n",
		versions(sandbox), versions(native))
	return b.String()
}

// loadTree reads every file of Lib/test (without __pycache__) into memory once, to seed each run's workspace.
func loadTree(root string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "__pycache__" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	return files, err
}

func runSandbox(ctx context.Context, sb *wasmbox.Sandbox, tree map[string][]byte, mod string) (*moduleResult, error) {
	ws := wasmbox.NewWorkspace(workspaceBytes, workspaceFiles)
	for name, data := range tree {
		if err := ws.WriteFile("lib/test/"+name, data); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	res, runErr := sb.RunProgram(ctx, wasmbox.Program{
		Code: runnerSrc, Filename: "runner.py", Workspace: ws,
		Args: []string{"runner.py", "--libdir", "/workspace/lib", mod, "/workspace/" + resultsFile},
	})
	data, _ := ws.ReadFile(resultsFile)
	r := parseResults(mod, data)
	if !r.Done {
		r.Seconds = time.Since(t0).Seconds()
		switch {
		case errors.Is(runErr, wasmbox.ErrTimeout):
			r.ModStatus, r.ModMsg = "timeout", fmt.Sprintf("stopped after %s", sandboxTimeout)
		default:
			r.ModStatus, r.ModMsg = "crash", crashMsg(res, runErr)
		}
	}
	return &r, nil
}

func crashMsg(res *wasmbox.Result, err error) string {
	switch {
	case res != nil && res.Exception != nil:
		return res.Exception.Type + ": " + oneLine(res.Exception.Message)
	case err != nil:
		return oneLine(err.Error())
	case res != nil:
		return fmt.Sprintf("exit %d: %s", res.ExitCode, oneLine(lastLines(res.Stderr, 3)))
	}
	return "no result"
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func runNative(ctx context.Context, python, runner, mod string) *moduleResult {
	dir, err := os.MkdirTemp("", "wasmbox-conformance-")
	if err != nil {
		return &moduleResult{Module: mod, ModStatus: "crash", ModMsg: err.Error()}
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, resultsFile)
	ctx, cancel := context.WithTimeout(ctx, nativeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, runner, mod, out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	runErr := cmd.Run()
	data, _ := os.ReadFile(out)
	r := parseResults(mod, data)
	if !r.Done {
		r.Seconds = time.Since(t0).Seconds()
		if ctx.Err() != nil {
			r.ModStatus, r.ModMsg = "timeout", fmt.Sprintf("stopped after %s", nativeTimeout)
		} else {
			r.ModStatus, r.ModMsg = "crash", oneLine(fmt.Sprint(runErr)+": "+lastLines(stderr.String(), 3))
		}
	}
	return &r
}

// TestConformance runs the chosen modules of CPython's Lib/test in the sandbox (and natively, when a native
// CPython built from the same source is given), prints the per-module table, and fails on any difference from
// expectations.txt. conformance/run.sh (make conformance, .ci/conformance.sh) prepares its inputs.
func TestConformance(t *testing.T) {
	lib := os.Getenv("WASMBOX_CONFORMANCE_LIB")
	if lib == "" {
		t.Skip("WASMBOX_CONFORMANCE_LIB is not set: run `make conformance` (conformance/run.sh fetches CPython's Lib/test from the pinned source)")
	}
	patch, err := os.ReadFile(filepath.Join(lib, "..", "Include", "patchlevel.h"))
	if err != nil || !bytes.Contains(patch, []byte(`#define PY_VERSION              "3.13.5"`)) {
		t.Fatalf("%s is not CPython 3.13.5's Lib (the interpreter's source): %v", lib, err)
	}
	mods, err := loadModules(modulesFile)
	if err != nil {
		t.Fatal(err)
	}
	switch set := os.Getenv("WASMBOX_CONFORMANCE_SET"); {
	case set == "ci":
		var ci []module
		for _, m := range mods {
			if m.CI {
				ci = append(ci, m)
			}
		}
		mods = ci
	case set == "" || set == "full":
	default: // a comma-separated list, for iterating on a few modules
		var picked []module
		for _, name := range strings.Split(set, ",") {
			picked = append(picked, module{Name: strings.TrimSpace(name)})
		}
		mods = picked
	}
	exp, err := loadExpectations(expectationsFile)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := loadTree(filepath.Join(lib, "test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	native := map[string]*moduleResult{}
	nativeDone := make(chan struct{})
	if py := os.Getenv("WASMBOX_CONFORMANCE_NATIVE"); py != "" {
		runner := filepath.Join(t.TempDir(), "runner.py")
		if err := os.WriteFile(runner, []byte(runnerSrc), 0o644); err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(nativeDone)
			for _, m := range mods {
				r := runNative(ctx, py, runner, m.Name)
				native[m.Name] = r
			}
		}()
	} else {
		close(nativeDone)
	}

	sb, err := wasmbox.New(ctx, wasmbox.Config{
		Timeout: sandboxTimeout, MemoryLimit: sandboxMemory,
		WorkspaceBytes: workspaceBytes, WorkspaceFiles: workspaceFiles,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	sandbox := map[string]*moduleResult{}
	var results []*moduleResult
	var diffs []string
	for _, m := range mods {
		r, err := runSandbox(ctx, sb, tree, m.Name)
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		tests, pass, skip, fail := r.counts()
		t.Logf("%-18s %s tests=%d pass=%d skip=%d fail=%d %.1fs", m.Name, r.ModStatus, tests, pass, skip, fail, r.Seconds)
		sandbox[m.Name] = r
		results = append(results, r)
		diffs = append(diffs, compare(r, exp)...)
	}
	<-nativeDone

	tab := table(mods, sandbox, native)
	if out := os.Getenv("WASMBOX_CONFORMANCE_OUT"); out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "table.md"), []byte(tab), 0o644); err != nil {
			t.Fatal(err)
		}
		dump, _ := json.MarshalIndent(map[string]any{"sandbox": sandbox, "native": native}, "", " ")
		if err := os.WriteFile(filepath.Join(out, "results.json"), dump, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Log("\n" + tab)

	if os.Getenv("WASMBOX_CONFORMANCE_UPDATE") == "1" {
		if err := writeExpectations(expectationsFile, updated(exp, results, native)); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s (%d differences folded in)", expectationsFile, len(diffs))
		return
	}
	if len(diffs) > 0 {
		t.Errorf("%d differences from %s (make conformance-update rewrites it; review the diff):\n%s",
			len(diffs), expectationsFile, strings.Join(diffs, "\n"))
	}
}
