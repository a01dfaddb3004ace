package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// SciRow is what bench/compare reports for the sci runtime (numpy and pandas built in). It is measured by a
// child linked with github.com/wasmbox/wasmbox/sci (SciMain), since the main module cannot import that one.
type SciRow struct {
	// FreshRunP50MS is print(1) on a sci sandbox, whose snapshot holds numpy and pandas imported; BaseFreshRunP50MS
	// the same on the base runtime, interleaved with it.
	FreshRunP50MS     float64 `json:"sci_fresh_run_p50_ms"`
	FreshRun          Spread  `json:"sci_fresh_run_ms_spread"`
	BaseFreshRunP50MS float64 `json:"base_fresh_run_p50_ms"`
	// ImportMS is "import numpy, pandas" in a sci sandbox with no snapshot of them (Preload empty): what the
	// snapshot saves every run. NativeImportMS is the same import in native CPython.
	ImportMS       Spread  `json:"sci_import_ms"`
	NativeImportMS *Spread `json:"native_import_ms,omitempty"`
	// PSSPerSandboxMiB is the proportional set size one live idle sci session adds (as W4).
	PSSPerSandboxMiB Spread `json:"sci_pss_per_sandbox_mib"`
	// Workloads are the vectorised workloads, in-guest seconds against native's, as interleaved pairs.
	Workloads []SciWorkloadRow `json:"workloads"`
	// Native says what the native reference was; Skipped what was not measured, and why.
	Native  string   `json:"native"`
	Skipped []string `json:"skipped"`
}

// SciWorkloadRow is one vectorised workload: the median seconds of its timed part in the sandbox and natively,
// and the spread of the ratios of each interleaved pair.
type SciWorkloadRow struct {
	Name           string   `json:"name"`
	Seconds        float64  `json:"seconds"`
	NativeSeconds  *float64 `json:"native_seconds"`
	RatioVsNative  *float64 `json:"ratio_vs_native"`
	RatioSpread    Spread   `json:"ratio_spread"`
	RatioSpreadIQR float64  `json:"ratio_q3_over_q1,omitempty"`
}

// SciWorkload is a workload for the sci runtime: Setup runs first (imports, data), then Body Reps times, timed.
type SciWorkload struct {
	Name, Setup, Body string
	Reps              int
}

// SciWorkloads are the vectorised workloads: array math on 10⁶ elements, a groupby over 10⁵ rows, read_csv of a
// few MB.
var SciWorkloads = []SciWorkload{
	{Name: "array math, 10^6 float64", Reps: 10,
		Setup: "import numpy as np\na = np.random.default_rng(0).random(1_000_000)\n",
		Body:  "r = float((np.sqrt(a) * 2.0 + np.sin(a) * a).sum()); s = np.sort(a); m = a.reshape(1000, 1000).mean(axis=0); d = np.diff(np.cumsum(a)).max()\n"},
	{Name: "pandas groupby, 10^5 rows", Reps: 10,
		Setup: "import numpy as np, pandas as pd\nrng = np.random.default_rng(0)\n" +
			"df = pd.DataFrame({'k': rng.integers(0, 1000, 100_000), 'c': rng.choice(['a', 'b', 'c', 'd'], 100_000), 'v': rng.random(100_000), 'w': rng.random(100_000)})\n",
		Body: "g = df.groupby(['k', 'c']).agg(vs=('v', 'sum'), vm=('v', 'mean'), wx=('w', 'max')); n = len(g)\n"},
	{Name: "pandas read_csv, 4 MB", Reps: 3,
		Setup: "import numpy as np, pandas as pd, tempfile, os\nrng = np.random.default_rng(0)\n" +
			"df = pd.DataFrame({'id': np.arange(80_000), 'x': rng.random(80_000), 'y': rng.normal(size=80_000), 'city': rng.choice(['Berlin', 'Paris', 'Lisbon'], 80_000), 'day': pd.date_range('2024-01-01', periods=80_000, freq='min').astype(str)})\n" +
			"path = os.path.join(tempfile.gettempdir(), 'wasmbox-bench-%d.csv' % os.getpid())\ndf.to_csv(path, index=False)\nimport atexit; atexit.register(os.remove, path)\nassert os.path.getsize(path) > 3_500_000, os.path.getsize(path)\n",
		Body: "t = pd.read_csv(path, parse_dates=['day']); n = len(t)\n"},
}

// Program is the workload as one program that prints the seconds its timed part took.
func (w SciWorkload) Program() string {
	return w.Setup + "import time as _t\n_t0 = _t.perf_counter()\nfor _ in range(" + strconv.Itoa(w.Reps) + "):\n" +
		indent(w.Body) + "print(_t.perf_counter() - _t0)\n"
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// SciNative is the native reference: a CPython and the directory holding numpy and pandas built for it.
type SciNative struct {
	Python, Site string
}

// FindSciNative locates the native numpy and pandas that pyruntime/sci/native.sh builds (the same sources as the
// sci runtime, built with gcc for this machine): $WASMBOX_SCI_NATIVE_PYTHON and $WASMBOX_SCI_NATIVE_SITE, or
// native.sh's default places under $WASMBOX_BUILD (default ~/.cache/wasmbox-build).
func FindSciNative() (SciNative, error) {
	work := os.Getenv("WASMBOX_BUILD")
	if work == "" {
		home, _ := os.UserHomeDir()
		work = filepath.Join(home, ".cache", "wasmbox-build")
	}
	n := SciNative{Python: os.Getenv("WASMBOX_SCI_NATIVE_PYTHON"), Site: os.Getenv("WASMBOX_SCI_NATIVE_SITE")}
	if n.Python == "" {
		n.Python = filepath.Join(work, "sci", "base", "native", "python")
	}
	if n.Site == "" {
		n.Site = filepath.Join(work, "sci", "native-ref", "site")
	}
	if _, err := os.Stat(n.Python); err != nil {
		return n, fmt.Errorf("no native CPython at %s (pyruntime/sci/build.sh builds it; or set WASMBOX_SCI_NATIVE_PYTHON)", n.Python)
	}
	for _, p := range []string{"numpy", "pandas"} {
		if _, err := os.Stat(filepath.Join(n.Site, p)); err != nil {
			return n, fmt.Errorf("no native %s in %s (run pyruntime/sci/native.sh; or set WASMBOX_SCI_NATIVE_SITE)", p, n.Site)
		}
	}
	return n, nil
}

// Run runs a program natively and returns the number it printed.
func (n SciNative) Run(ctx context.Context, code string) (float64, error) {
	cmd := exec.CommandContext(ctx, n.Python, "-s", "-E", "-c", "import sys; sys.path.insert(0, "+pyQuote(n.Site)+")\n"+code)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("bench: native: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
}

// SciNumbers measures a SciRow. cfg must select the sci runtime (Config.Runtime "sci", linked in by the caller);
// rounds is the number of interleaved rounds of each measure.
func SciNumbers(ctx context.Context, cfg wasmbox.Config, rounds int) (SciRow, error) {
	if rounds < 1 {
		return SciRow{}, errors.New("bench: SciNumbers needs rounds ≥ 1")
	}
	row := SciRow{Skipped: []string{}}
	sb, err := wasmbox.New(ctx, cfg)
	if err != nil {
		return row, err
	}
	defer sb.Close(ctx)
	if sb.Info().Runtime != "sci" {
		return row, fmt.Errorf("bench: SciNumbers: the sandbox runs %q, not sci", sb.Info().Runtime)
	}
	baseCfg := cfg
	baseCfg.Runtime, baseCfg.Preload = "", nil
	base, err := wasmbox.New(ctx, baseCfg)
	if err != nil {
		return row, err
	}
	defer base.Close(ctx)

	// Fresh runs, interleaved in blocks of 10 (sci, base), after a warm-up.
	timeRun := func(s *wasmbox.Sandbox, code string) (float64, error) {
		t := time.Now()
		res, err := s.Run(ctx, code)
		if err != nil {
			return 0, err
		}
		if res.ExitCode != 0 {
			return 0, fmt.Errorf("bench: %q exited %d: %s", code, res.ExitCode, res.Stderr)
		}
		return float64(time.Since(t).Microseconds()) / 1000, nil
	}
	var sciMS, baseMS []float64
	for i := range 20 + 30*rounds {
		for _, p := range []struct {
			s   *wasmbox.Sandbox
			out *[]float64
		}{{sb, &sciMS}, {base, &baseMS}} {
			v, err := timeRun(p.s, "print(1)")
			if err != nil {
				return row, err
			}
			if i >= 20 {
				*p.out = append(*p.out, v)
			}
		}
	}
	row.FreshRun, row.BaseFreshRunP50MS = Summarise(sciMS), Summarise(baseMS).Median
	row.FreshRunP50MS = row.FreshRun.Median

	native, nerr := FindSciNative()
	if nerr != nil {
		row.Skipped = append(row.Skipped, "native reference: "+nerr.Error())
		row.Native = "not measured: " + nerr.Error()
	} else {
		row.Native = "numpy 2.2.4 and pandas 2.2.3 built from the same sources by pyruntime/sci/native.sh (gcc 12 -O3 via meson's release build, x86-64 with numpy's SIMD dispatch, no BLAS: lapack-lite) on CPython 3.13.5 built natively (-O3, no PGO)"
	}

	// Import without the snapshot, against native's.
	bareCfg := cfg
	bareCfg.Preload = []string{}
	bare, err := wasmbox.New(ctx, bareCfg)
	if err != nil {
		return row, err
	}
	defer bare.Close(ctx)
	importProg := "import time as _t\n_t0 = _t.perf_counter()\nimport numpy, pandas\nprint((_t.perf_counter() - _t0) * 1000)\n"
	var imp, nimp []float64
	for range rounds {
		v, err := runFloat(ctx, bare, importProg)
		if err != nil {
			return row, err
		}
		imp = append(imp, v)
		if nerr == nil {
			v, err := native.Run(ctx, importProg)
			if err != nil {
				return row, err
			}
			nimp = append(nimp, v)
		}
	}
	row.ImportMS = Summarise(imp)
	if nerr == nil {
		s := Summarise(nimp)
		row.NativeImportMS = &s
	}

	if row.PSSPerSandboxMiB, err = PSSPerSession(ctx, sb, 4, rounds); err != nil {
		row.Skipped = append(row.Skipped, "sci PSS: "+err.Error())
	}

	for _, w := range SciWorkloads {
		prog := w.Program()
		wr := SciWorkloadRow{Name: w.Name}
		if nerr != nil {
			var ts []float64
			for range rounds {
				v, err := runFloat(ctx, sb, prog)
				if err != nil {
					return row, fmt.Errorf("%s: %w", w.Name, err)
				}
				ts = append(ts, v)
			}
			wr.Seconds = Summarise(ts).Median
		} else {
			ours, theirs, ratio, err := Pairs(rounds, func() (float64, error) { return runFloat(ctx, sb, prog) },
				func() (float64, error) { return native.Run(ctx, prog) })
			if err != nil {
				return row, fmt.Errorf("%s: %w", w.Name, err)
			}
			n := Summarise(theirs).Median
			wr.Seconds, wr.NativeSeconds, wr.RatioVsNative, wr.RatioSpread = Summarise(ours).Median, &n, &ratio.Median, ratio
			if ratio.Q1 > 0 {
				wr.RatioSpreadIQR = ratio.Q3 / ratio.Q1
			}
		}
		row.Workloads = append(row.Workloads, wr)
	}
	return row, nil
}

// SciMain is the whole of the sci measuring child: it prints SciNumbers as JSON on stdout. Arguments: the
// number of rounds (default 5).
func SciMain(args []string, stdout, stderr io.Writer) int {
	rounds := 5
	if len(args) > 0 {
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "scibench: want a number of rounds ≥ 1, got %q\n", args[0])
			return 2
		}
		rounds = n
	}
	row, err := SciNumbers(context.Background(), wasmbox.Config{Runtime: "sci", Timeout: 10 * time.Minute, MemoryLimit: 1 << 30}, rounds)
	if err != nil {
		fmt.Fprintln(stderr, "scibench:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(row); err != nil {
		fmt.Fprintln(stderr, "scibench:", err)
		return 1
	}
	return 0
}
