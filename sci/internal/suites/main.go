// Command suites runs a chosen part of numpy's and pandas' own test suites inside the sci runtime and checks every
// failure against sci/suites/expectations.txt, where each one has a class and each class a reason:
//
//	sci/suites/prepare.sh DIR                          # the workspace: pytest, the suites' test files
//	go run ./internal/suites -ws DIR [-set ci|full] [-update] [-json]
//
// Each line of sci/suites/modules.txt ("SET PATH") is one sandbox run of pytest on PATH; the ci set is a subset of
// full. A failure (or error) that no expectation explains fails the command, and so does a module whose run
// did not finish (a crash or its deadline); expectations that no longer fail are reported, so they can be
// removed. -update appends the unexplained failures to the expectations file with the class "unclassified",
// for a person to classify.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	_ "github.com/wasmbox/wasmbox/sci"
	"github.com/wasmbox/wasmbox/wasmbox"
)

type outcome struct {
	ID, Outcome, Message string
}

type moduleResult struct {
	Path     string         `json:"path"`
	Seconds  float64        `json:"seconds"`
	Counts   map[string]int `json:"counts"`
	Failures []failure      `json:"failures"`
	RunError string         `json:"run_error,omitempty"` // the run did not finish: why
}

type failure struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	Message string `json:"message"`
	Class   string `json:"class"` // "" when no expectation explains it
}

type expectations struct {
	classes map[string]string // class → reason
	order   []string
	rules   []rule
}

type rule struct {
	pattern, class string // pattern: a test ID, where "*" matches any run of characters
	used           bool
}

func (e *expectations) classify(id string) string {
	for i := range e.rules {
		r := &e.rules[i]
		if globMatch(r.pattern, id) {
			r.used = true
			return r.class
		}
	}
	return ""
}

// globMatch reports whether s matches pattern, in which "*" matches any run of characters and every other
// character itself (test IDs hold "[" and "/", which path.Match would treat specially).
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

func readExpectations(path string) (*expectations, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	e := &expectations{classes: map[string]string{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "class "):
			name, reason, ok := strings.Cut(strings.TrimPrefix(line, "class "), ":")
			if !ok || strings.TrimSpace(reason) == "" {
				return nil, fmt.Errorf("%s:%d: want \"class NAME: reason\"", path, n)
			}
			e.classes[strings.TrimSpace(name)] = strings.TrimSpace(reason)
			e.order = append(e.order, strings.TrimSpace(name))
		default:
			i := strings.LastIndexByte(line, ' ')
			if i < 0 {
				return nil, fmt.Errorf("%s:%d: want \"TEST-ID CLASS\"", path, n)
			}
			id, class := strings.TrimSpace(line[:i]), line[i+1:]
			if _, ok := e.classes[class]; !ok && class != "unclassified" {
				return nil, fmt.Errorf("%s:%d: class %q has no reason (declare it with a class line first)", path, n, class)
			}
			e.rules = append(e.rules, rule{pattern: id, class: class})
		}
	}
	return e, sc.Err()
}

func readModules(path, set string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, p, ok := strings.Cut(line, " ")
		if !ok || (s != "ci" && s != "full") {
			return nil, fmt.Errorf("%s:%d: want \"ci|full PATH\"", path, n+1)
		}
		if set == "full" || s == "ci" {
			out = append(out, strings.TrimSpace(p))
		}
	}
	// In the full set a ci path inside a full one (pandas/tests/groupby/aggregate in pandas/tests/groupby) runs
	// once, as part of the larger.
	return slices.DeleteFunc(out, func(p string) bool {
		return slices.ContainsFunc(out, func(q string) bool { return q != p && strings.HasPrefix(p, q+"/") })
	}), nil
}

// runModule runs pytest on one path in a fresh sci sandbox over a copy of the workspace directory.
func runModule(ctx context.Context, sb *wasmbox.Sandbox, wsDir, path string, timeout time.Duration) (mr moduleResult) {
	mr = moduleResult{Path: path, Counts: map[string]int{}}
	start := time.Now()
	defer func() { mr.Seconds = time.Since(start).Seconds() }()
	ws := wasmbox.NewWorkspace(1<<30, 100_000)
	if err := ws.CopyIn(ctx, wsDir); err != nil {
		mr.RunError = err.Error()
		return mr
	}
	code, err := os.ReadFile(filepath.Join(wsDir, "runsuite.py"))
	if err != nil {
		mr.RunError = err.Error()
		return mr
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := sb.RunProgram(rctx, wasmbox.Program{Code: string(code), Filename: "runsuite.py", Workspace: ws,
		Args: append([]string{"runsuite.py"}, strings.Fields(path)...)})
	if err != nil {
		mr.RunError = err.Error()
		return mr
	}
	var line string
	for _, l := range strings.Split(res.Stdout, "\n") {
		if strings.HasPrefix(l, "SUITE-RESULTS ") {
			line = strings.TrimPrefix(l, "SUITE-RESULTS ")
		}
	}
	if line == "" {
		mr.RunError = fmt.Sprintf("no results (exit %d): %s", res.ExitCode, tail(res.Stderr+res.Stdout, 800))
		if res.Exception != nil {
			mr.RunError = fmt.Sprintf("no results: %s", tail(res.Exception.Traceback, 800))
		}
		return mr
	}
	var got struct {
		Exit    int         `json:"exit"`
		Results [][3]string `json:"results"`
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		mr.RunError = "results: " + err.Error()
		return mr
	}
	for _, r := range got.Results {
		mr.Counts[r[1]]++
		if r[1] == "failed" || r[1] == "error" {
			mr.Failures = append(mr.Failures, failure{ID: r[0], Outcome: r[1], Message: r[2]})
		}
	}
	if len(got.Results) == 0 {
		mr.RunError = fmt.Sprintf("pytest ran no test (exit %d): %s", got.Exit, tail(res.Stdout, 800))
	}
	return mr
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func main() {
	wsDir := flag.String("ws", "", "the workspace directory that sci/suites/prepare.sh made")
	set := flag.String("set", "ci", "ci (the short subset) or full")
	dir := flag.String("dir", "suites", "the directory of modules.txt and expectations.txt")
	update := flag.Bool("update", false, "append unexplained failures to expectations.txt as unclassified")
	asJSON := flag.Bool("json", false, "print the results as JSON")
	timeout := flag.Duration("timeout", 30*time.Minute, "the deadline of one module's run")
	cacheDir := flag.String("cache", os.Getenv("WASMBOX_CACHE_DIR"), "the compile cache (Config.CacheDir; default $WASMBOX_CACHE_DIR, else the user's)")
	flag.Parse()
	if err := run(*wsDir, *set, *dir, *cacheDir, *update, *asJSON, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "suites:", err)
		os.Exit(1)
	}
}

func run(wsDir, set, dir, cacheDir string, update, asJSON bool, timeout time.Duration) error {
	if wsDir == "" {
		return errors.New("-ws DIR is required (make it with sci/suites/prepare.sh DIR)")
	}
	if set != "ci" && set != "full" {
		return fmt.Errorf("-set: want ci or full, got %q", set)
	}
	mods, err := readModules(filepath.Join(dir, "modules.txt"), set)
	if err != nil {
		return err
	}
	expPath := filepath.Join(dir, "expectations.txt")
	exp, err := readExpectations(expPath)
	if err != nil {
		return err
	}
	ctx := context.Background()
	// numpy and pandas are imported by the runtime's snapshot; pytest's own imports happen in each run.
	sb, err := wasmbox.New(ctx, wasmbox.Config{Runtime: "sci", Timeout: timeout, MemoryLimit: 2 << 30,
		StdoutLimit: 64 << 20, StderrLimit: 16 << 20, WorkspaceBytes: 1 << 30, WorkspaceFiles: 100_000, CacheDir: cacheDir})
	if err != nil {
		return err
	}
	defer sb.Close(ctx)
	var results []moduleResult
	unexplained, runFailures := 0, 0
	classCount := map[string]int{}
	for _, m := range mods {
		mr := runModule(ctx, sb, wsDir, m, timeout)
		if mr.RunError != "" {
			if c := exp.classify("RUN " + m); c != "" && c != "unclassified" {
				classCount[c]++
				mr.RunError += " [expected: " + c + "]"
			} else {
				runFailures++
			}
		}
		for i := range mr.Failures {
			f := &mr.Failures[i]
			f.Class = exp.classify(f.ID)
			if f.Class == "" || f.Class == "unclassified" {
				unexplained++
			} else {
				classCount[f.Class]++
			}
		}
		if !asJSON {
			fmt.Fprintf(os.Stderr, "%-60s %s\n", m, summary(mr))
		}
		results = append(results, mr)
	}
	var stale []string
	for _, r := range exp.rules {
		if !r.used && slices.ContainsFunc(mods, func(m string) bool { return strings.HasPrefix(r.pattern, m) || strings.HasPrefix(r.pattern, "RUN "+m) }) {
			stale = append(stale, r.pattern+" ("+r.class+")")
		}
	}
	if asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"set": set, "modules": results, "classes": classCount, "now_passing": stale})
	} else {
		printReport(results, exp, classCount, stale)
	}
	if update {
		var lines []string
		for _, mr := range results {
			if mr.RunError != "" && exp.classify("RUN "+mr.Path) == "" {
				lines = append(lines, "RUN "+mr.Path+" unclassified")
			}
			for _, f := range mr.Failures {
				if f.Class == "" {
					lines = append(lines, f.ID+" unclassified")
				}
			}
		}
		if len(lines) > 0 {
			fh, err := os.OpenFile(expPath, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(fh, strings.Join(lines, "\n"))
			if cerr := fh.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "suites: appended %d unclassified lines to %s\n", len(lines), expPath)
		}
	}
	if unexplained > 0 || runFailures > 0 {
		return fmt.Errorf("%d failures no expectation explains, %d module runs that did not finish (see above)", unexplained, runFailures)
	}
	return nil
}

func summary(mr moduleResult) string {
	if mr.RunError != "" {
		return "run failed: " + tail(mr.RunError, 300)
	}
	return fmt.Sprintf("%d passed, %d failed, %d errors, %d skipped (%.0f s)", mr.Counts["passed"], mr.Counts["failed"],
		mr.Counts["error"], mr.Counts["skipped"], mr.Seconds)
}

func printReport(results []moduleResult, exp *expectations, classCount map[string]int, stale []string) {
	fmt.Printf("%-58s %8s %7s %7s %8s %9s\n", "module", "passed", "failed", "errors", "skipped", "pass rate")
	tot := map[string]map[string]int{}
	for _, mr := range results {
		pkg := strings.SplitN(mr.Path, "/", 2)[0]
		if tot[pkg] == nil {
			tot[pkg] = map[string]int{}
		}
		for k, v := range mr.Counts {
			tot[pkg][k] += v
		}
		if mr.RunError != "" {
			fmt.Printf("%-58s run did not finish: %s\n", mr.Path, tail(mr.RunError, 200))
			continue
		}
		fmt.Printf("%-58s %8d %7d %7d %8d %9s\n", mr.Path, mr.Counts["passed"], mr.Counts["failed"], mr.Counts["error"], mr.Counts["skipped"], rate(mr.Counts))
	}
	pkgs := make([]string, 0, len(tot))
	for p := range tot {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		c := tot[p]
		fmt.Printf("%-58s %8d %7d %7d %8d %9s\n", p+" (total)", c["passed"], c["failed"], c["error"], c["skipped"], rate(c))
	}
	fmt.Println("\nfailure classes (pass rate: passed / (passed + failed + errors); skips and expected failures are the suites' own)")
	for _, c := range exp.order {
		if classCount[c] > 0 {
			fmt.Printf("  %-22s %5d  %s\n", c, classCount[c], exp.classes[c])
		}
	}
	for _, mr := range results {
		for _, f := range mr.Failures {
			if f.Class == "" || f.Class == "unclassified" {
				fmt.Printf("  UNEXPLAINED %s (%s): %s\n", f.ID, f.Outcome, f.Message)
			}
		}
	}
	for _, s := range stale {
		fmt.Printf("  now passing (remove from expectations.txt): %s\n", s)
	}
}

func rate(c map[string]int) string {
	n := c["passed"] + c["failed"] + c["error"]
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(c["passed"])/float64(n))
}
