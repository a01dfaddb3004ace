package wasmbox_test

// Host memory under hostile programs.
//
// TestHostRSS runs every program of testdata/hostrss, each in a fresh child process so that the kernel's peak
// resident set (VmHWM in /proc/self/status) is that program's alone. The child is this test binary re-executed
// with -test.run=^TestHostRSSChild$ and WASMBOX_HOSTRSS_PROGRAM naming the program: it creates a Sandbox with
// hostRSSConfig, runs the program through the public API (Run, or Session.Exec for "# mode: session"), reads
// its VmHWM and prints one JSON line. The parent fails when a child's peak exceeds the bound:
//
//	bound = MemoryLimit + 2 × WorkspaceBytes + StdoutLimit + StderrLimit + hostRSSAllowance
//
// The guest's linear memory, the workspace, /tmp and the captured output are host memory by design, so a
// program may use all of them; hostRSSAllowance covers what every run costs the host whatever the program does:
// the Go runtime, the compiled interpreter, the snapshot image, the engine's own buffers. It was chosen from
// benign runs (the programs named 00_benign_*): an empty program peaks at about 120 MiB, and 00_benign_all, which
// holds everything a program may (its whole memory limit, a full /workspace and /tmp, full stdout and stderr),
// at about 480 MiB with wazero and 460 MiB with wasmtime, i.e. about 95 MiB above the limits it uses. The
// allowance of 256 MiB (bound 642 MiB) leaves room for that fixed cost, for noise and for garbage the Go
// collector has not yet returned, and none for a host structure that grows with what the guest chooses.
//
// Before the children, the parent creates one Sandbox of the same Config so that the interpreter's compiled code
// and its snapshot are in the on-disk cache the children share (Config.CacheDir's default, which in tests is the
// test binary's temporary cache, passed to the children by internal/testcache): compiling is a one-off cost of a
// process, not something a program can make the host do. Timeouts are shorter than the library's default (30 s)
// to keep the test short, so attacks whose cost grows with time run with a header timeout long enough to show it.
//
// The parent samples each child's VmRSS every 100 ms and kills it above hostRSSKillAt (so a runaway program
// cannot take the machine) or after hostRSSChildWait; either is a failure, reported with the figure reached.
// Every child prints its result line to stdout; the parent logs a table of program, engine, peak RSS, bound and
// outcome.
//
// The engine is wazero unless another is built in (WASMBOX_HOSTRSS_ENGINE; the wasmtime engine is a module of its
// own, github.com/wasmbox/wasmbox/wasmtime, that this package's tests do not import). The test is skipped under -race (the detector's
// shadow memory is not the host's) and with -short. Linux only: VmHWM is read from /proc.
//
// Environment:
//
//	WASMBOX_HOSTRSS_REPORT=1      measurement mode: print the table, never fail on a bound (children killed at
//	                              hostRSSKillAt are reported as such)
//	WASMBOX_HOSTRSS_ONLY=a,b      run only the programs whose file name contains one of these substrings
//	WASMBOX_HOSTRSS_ENGINE=name   the engine to measure (default: wasmtime if built in, else wazero)
//
// Program headers (comment lines at the top of each .py):
//
//	# hostrss: what the program attacks (one line; required)
//	# mode: run | session           Sandbox.RunProgram (default) or one Session running the program `execs` times
//	# execs: N                      number of Session.Exec calls in session mode (default 1)
//	# timeout: 8s                   Config.Timeout for this program (default hostRSSTimeout)
//	# stdin: endless                Program.Stdin is a reader that never ends (default: no stdin)

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/wasmbox"
)

const (
	hostRSSMemoryLimit = 256 << 20
	hostRSSTimeout     = 5 * time.Second
	hostRSSAllowance   = 256 << 20
	hostRSSKillAt      = 6 << 30
	hostRSSChildWait   = 60 * time.Second
	hostRSSSample      = 100 * time.Millisecond
	hostRSSResultTag   = "HOSTRSS-RESULT "
)

// hostRSSConfig is the Sandbox every child runs its program in: the library's defaults except a smaller Timeout
// (to keep the test short; programs that need longer to show their growth say so in a header).
func hostRSSConfig(engine string, timeout time.Duration) wasmbox.Config {
	return wasmbox.Config{
		MemoryLimit: hostRSSMemoryLimit,
		Timeout:     timeout,
		Engine:      engine,
	}
}

// hostRSSBound is the peak RSS a child may reach, from the effective limits of its Sandbox.
func hostRSSBound() int64 {
	return hostRSSMemoryLimit + 2*wasmbox.DefaultWorkspaceBytes + 2*wasmbox.DefaultOutputLimit + hostRSSAllowance
}

type hostRSSProgram struct {
	path, name, about string
	session           bool
	execs             int
	timeout           time.Duration
	endlessStdin      bool
}

func parseHostRSSProgram(path string) (hostRSSProgram, string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return hostRSSProgram{}, "", err
	}
	p := hostRSSProgram{path: path, name: strings.TrimSuffix(filepath.Base(path), ".py"), execs: 1, timeout: hostRSSTimeout}
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "# ") {
			break
		}
		key, val, ok := strings.Cut(strings.TrimPrefix(line, "# "), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "hostrss":
			p.about = val
		case "mode":
			switch val {
			case "run":
			case "session":
				p.session = true
			default:
				return p, "", fmt.Errorf("%s: unknown mode %q", path, val)
			}
		case "execs":
			if p.execs, err = strconv.Atoi(val); err != nil || p.execs < 1 {
				return p, "", fmt.Errorf("%s: bad execs %q", path, val)
			}
		case "timeout":
			if p.timeout, err = time.ParseDuration(val); err != nil || p.timeout <= 0 {
				return p, "", fmt.Errorf("%s: bad timeout %q", path, val)
			}
		case "stdin":
			if val != "endless" {
				return p, "", fmt.Errorf("%s: unknown stdin %q", path, val)
			}
			p.endlessStdin = true
		}
	}
	if p.about == "" {
		return p, "", fmt.Errorf("%s: no '# hostrss:' header", path)
	}
	return p, string(src), nil
}

// hostRSSReport is what a child prints.
type hostRSSReport struct {
	Engine       string  `json:"engine"`
	BaseRSS      int64   `json:"base_rss"` // VmHWM once the Sandbox is ready, before the program
	PeakRSS      int64   `json:"peak_rss"` // VmHWM at the end
	Seconds      float64 `json:"seconds"`  // wall time of the program's runs
	ExitCode     int     `json:"exit_code"`
	Kind         string  `json:"kind,omitempty"` // RunError.Kind of the last failed run
	Error        string  `json:"error,omitempty"`
	Exception    string  `json:"exception,omitempty"`
	FilesChanged int     `json:"files_changed"`
	ToolCalls    int     `json:"tool_calls"`
	Stdout       int     `json:"stdout"`
	Stderr       int     `json:"stderr"`
	Execs        int     `json:"execs"`
}

// readVmStatus returns a field of /proc/<pid>/status in bytes ("VmHWM", "VmRSS").
func readVmStatus(pid, field string) (int64, error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("odd %s line %q", field, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb << 10, err
	}
	return 0, fmt.Errorf("no %s in /proc/%s/status", field, pid)
}

func hostRSSEngine() string {
	if e := os.Getenv("WASMBOX_HOSTRSS_ENGINE"); e != "" {
		return e
	}
	if slices.Contains(wasmbox.Engines(), "wasmtime") {
		return "wasmtime"
	}
	return "wazero"
}

func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

func TestHostRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("measures the host through /proc/<pid>/status (VmHWM, VmRSS), which only Linux has")
	}
	if raceEnabled() {
		t.Skip("the race detector's shadow memory would be counted as the host's; run without -race")
	}
	if testing.Short() {
		t.Skip("runs about twenty child processes, one to a few minutes; skipped with -short")
	}
	report := os.Getenv("WASMBOX_HOSTRSS_REPORT") == "1"
	engine := hostRSSEngine()
	files, err := filepath.Glob("testdata/hostrss/*.py")
	if err != nil || len(files) < 10 {
		t.Fatalf("want at least 10 programs in testdata/hostrss, have %d (%v)", len(files), err)
	}
	if only := os.Getenv("WASMBOX_HOSTRSS_ONLY"); only != "" {
		files = slices.DeleteFunc(files, func(f string) bool {
			for _, s := range strings.Split(only, ",") {
				if s != "" && strings.Contains(filepath.Base(f), s) {
					return false
				}
			}
			return true
		})
	}
	// Compile the interpreter and save its snapshot in the shared on-disk cache first, so that no child pays
	// for compiling: that is a one-off cost of the process, not something a program can make the host do.
	warm, err := wasmbox.New(context.Background(), hostRSSConfig(engine, hostRSSTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Run(context.Background(), "pass"); err != nil {
		t.Fatal(err)
	}
	_ = warm.Close(context.Background())
	bound := hostRSSBound()
	var table strings.Builder
	fmt.Fprintf(&table, "bound = memory %s + 2×workspace %s + output 2×%s + allowance %s = %s\n",
		mib(hostRSSMemoryLimit), mib(wasmbox.DefaultWorkspaceBytes), fmt.Sprintf("%d KiB", wasmbox.DefaultOutputLimit>>10),
		mib(hostRSSAllowance), mib(bound))
	fmt.Fprintf(&table, "%-28s %-8s %9s %9s %9s %6s  %s\n", "program", "engine", "peak RSS", "base", "bound", "secs", "outcome")
	var failures []string
	for _, f := range files {
		p, _, err := parseHostRSSProgram(f)
		if err != nil {
			t.Fatal(err)
		}
		rep, killed, childErr := runHostRSSChild(t, p, engine)
		outcome := "ok"
		failed := false
		switch {
		case killed != "":
			outcome, failed = killed, true
		case childErr != "":
			outcome, failed = "child failed: "+childErr, true
		case rep.PeakRSS > bound:
			outcome, failed = fmt.Sprintf("OVER BOUND by %s", mib(rep.PeakRSS-bound)), true
		}
		base, detail := "-", "no report" // a killed child reports nothing but the parent's samples
		if killed == "" && childErr == "" {
			base = mib(rep.BaseRSS)
			detail = fmt.Sprintf("exit %d", rep.ExitCode)
			if rep.Kind != "" {
				detail += " kind=" + rep.Kind
			}
			if rep.Exception != "" {
				detail += " exc=" + rep.Exception
			}
			detail += fmt.Sprintf(" changes=%d calls=%d out=%d/%d", rep.FilesChanged, rep.ToolCalls, rep.Stdout, rep.Stderr)
			if p.session {
				detail += fmt.Sprintf(" execs=%d", rep.Execs)
			}
		}
		fmt.Fprintf(&table, "%-28s %-8s %9s %9s %9s %6.1f  %s (%s)\n", p.name, engine, mib(rep.PeakRSS), base,
			mib(bound), rep.Seconds, outcome, detail)
		if failed {
			failures = append(failures, fmt.Sprintf("%s (%s): peak %s, bound %s: %s", p.name, p.about, mib(rep.PeakRSS), mib(bound), outcome))
		}
	}
	t.Log("host peak RSS per hostile program (fresh process each):\n" + table.String())
	if len(failures) == 0 {
		return
	}
	msg := "the host's memory is not bounded:\n  " + strings.Join(failures, "\n  ")
	if report {
		t.Log("WASMBOX_HOSTRSS_REPORT=1, not failing: " + msg)
		return
	}
	t.Error(msg)
}

// runHostRSSChild runs p in a fresh process and returns its report; killed says why the parent killed it (RSS
// over hostRSSKillAt, or no end after hostRSSChildWait), childErr why it produced no report.
func runHostRSSChild(t *testing.T, p hostRSSProgram, engine string) (rep hostRSSReport, killed, childErr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostRSSChild$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), "WASMBOX_HOSTRSS_PROGRAM="+p.path, "WASMBOX_HOSTRSS_ENGINE="+engine)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return rep, "", "start: " + err.Error()
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var sampled atomic.Int64 // the largest VmRSS the parent saw
	tick := time.NewTicker(hostRSSSample)
	defer tick.Stop()
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-tick.C:
			if rss, err := readVmStatus(pid, "VmRSS"); err == nil {
				if rss > sampled.Load() {
					sampled.Store(rss)
				}
				if rss > hostRSSKillAt && killed == "" {
					killed = fmt.Sprintf("KILLED: RSS %s > %s after %.1f s", mib(rss), mib(hostRSSKillAt), time.Since(start).Seconds())
					_ = cmd.Process.Kill()
				}
			}
			if time.Since(start) > hostRSSChildWait && killed == "" {
				killed = fmt.Sprintf("KILLED: still running after %s (RSS %s)", hostRSSChildWait, mib(sampled.Load()))
				_ = cmd.Process.Kill()
			}
		}
	}
	rep.PeakRSS = sampled.Load()
	rep.Seconds = time.Since(start).Seconds()
	if killed != "" {
		return rep, killed, ""
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	found := false
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), hostRSSResultTag); ok {
			if err := json.Unmarshal([]byte(line), &rep); err != nil {
				return rep, "", "bad report: " + err.Error()
			}
			found = true
		}
	}
	if !found || waitErr != nil {
		tail := stdout.String() + stderr.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return rep, "", fmt.Sprintf("no report (wait: %v): %s", waitErr, tail)
	}
	return rep, "", ""
}

// endlessReader is a stdin that never ends: lines of 'x' as fast as they are read.
type endlessReader struct{}

func (endlessReader) Read(p []byte) (int, error) {
	for i := range p {
		if i%4096 == 4095 {
			p[i] = '\n'
		} else {
			p[i] = 'x'
		}
	}
	return len(p), nil
}

// TestHostRSSChild is the child of TestHostRSS; it does nothing unless WASMBOX_HOSTRSS_PROGRAM is set.
func TestHostRSSChild(t *testing.T) {
	path := os.Getenv("WASMBOX_HOSTRSS_PROGRAM")
	if path == "" {
		t.Skip("the child process of TestHostRSS (WASMBOX_HOSTRSS_PROGRAM unset)")
	}
	p, src, err := parseHostRSSProgram(path)
	if err != nil {
		t.Fatal(err)
	}
	engine := os.Getenv("WASMBOX_HOSTRSS_ENGINE")
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, hostRSSConfig(engine, p.timeout))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	rep := hostRSSReport{Engine: engine}
	if rep.BaseRSS, err = readVmStatus("self", "VmHWM"); err != nil {
		t.Fatal(err)
	}
	prog := wasmbox.Program{Code: src, Filename: filepath.Base(path)}
	if p.endlessStdin {
		prog.Stdin = endlessReader{}
	}
	record := func(res *wasmbox.Result, err error) {
		rep.Execs++
		if err != nil {
			rep.Error = err.Error()
			if len(rep.Error) > 300 {
				rep.Error = rep.Error[:300] + "..."
			}
			var re *wasmbox.RunError
			if errors.As(err, &re) {
				rep.Kind = string(re.Kind)
			}
		}
		if res == nil {
			return
		}
		rep.ExitCode = res.ExitCode
		if res.Exception != nil {
			rep.Exception = res.Exception.Type
		}
		rep.FilesChanged += len(res.FilesChanged)
		rep.ToolCalls += len(res.ToolCalls)
		rep.Stdout += len(res.Stdout)
		rep.Stderr += len(res.Stderr)
	}
	start := time.Now()
	if p.session {
		se, err := sb.NewSession(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < p.execs; i++ {
			res, err := se.ExecProgram(ctx, prog)
			record(res, err)
			if errors.Is(err, wasmbox.ErrSessionBroken) || !se.Alive() {
				break
			}
		}
		_ = se.Close(ctx)
	} else {
		record(sb.RunProgram(ctx, prog))
	}
	rep.Seconds = time.Since(start).Seconds()
	if rep.PeakRSS, err = readVmStatus("self", "VmHWM"); err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", hostRSSResultTag, line)
}
