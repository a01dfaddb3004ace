// Tests of the sci interpreter built by pyruntime/sci/build.sh, loaded through wasmbox as Config.Interpreter.
// They run when the artifacts exist (build/sci of this repository, or the folder named by WASMBOX_SCI_DIR) and
// skip with the reason otherwise. They test a fresh build before sci/update.sh ships it into the sci Go module,
// whose own tests cover the shipped artifacts.
package sci_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// sciDir is where build.sh puts the artifacts.
func sciDir() string {
	if d := os.Getenv("WASMBOX_SCI_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "build", "sci")
}

// loadSci reads and verifies the artifacts, or skips the test when they are absent. WASMBOX_SCI_WASM replaces
// python.wasm (e.g. with the uninstrumented build, to see a deadline test fail without the instrumentation).
func loadSci(t *testing.T) *assets.Interpreter {
	t.Helper()
	dir := sciDir()
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("no sci interpreter in %s: build with pyruntime/sci/build.sh first", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("malformed SHA256SUMS line %q", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(dir, f[1]))
		if err != nil {
			t.Fatal(err)
		}
		if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != f[0] {
			t.Fatalf("%s: checksum mismatch with SHA256SUMS (rebuild with pyruntime/sci/build.sh)", f[1])
		}
		files[f[1]] = b
	}
	wasm := files["python.wasm"]
	if p := os.Getenv("WASMBOX_SCI_WASM"); p != "" {
		if wasm, err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		t.Logf("python.wasm replaced by %s", p)
	}
	if wasm == nil || files["stdlib.zip"] == nil || files["tzdata.zip"] == nil {
		t.Fatalf("%s lacks python.wasm, stdlib.zip or tzdata.zip", dir)
	}
	sum := sha256.Sum256(wasm)
	return &assets.Interpreter{Wasm: wasm, WasmSHA256: hex.EncodeToString(sum[:]), Stdlib: files["stdlib.zip"],
		TZData: files["tzdata.zip"], BuildInfo: string(files["BUILDINFO"])}
}

// needModule skips unless the build linked in the named builtin module.
func needModule(t *testing.T, it *assets.Interpreter, mod string) {
	t.Helper()
	for _, line := range strings.Split(it.BuildInfo, "\n") {
		if strings.HasPrefix(line, "builtin modules added:") && strings.Contains(line, " "+mod+" ") {
			return
		}
	}
	t.Skipf("this sci build has no %s (BUILDINFO lists what it has)", mod)
}

func newSandbox(t *testing.T, it *assets.Interpreter, cfg wasmbox.Config) *wasmbox.Sandbox {
	t.Helper()
	cfg.Interpreter = it
	sb, err := wasmbox.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

func run(t *testing.T, sb *wasmbox.Sandbox, code string) *wasmbox.Result {
	t.Helper()
	res, err := sb.Run(context.Background(), code)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	return res
}

// spin is the probe module's C loop, in Go.
func spin(n uint64) uint64 {
	x := uint64(0x9E3779B97F4A7C15)
	for i := uint64(0); i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		x += i
	}
	return x
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// The probe package: dotted builtins under a package from the zip, C and C++ (libc++) code, results checked
// against the same computations in Go.
func TestSciProbeModules(t *testing.T) {
	it := loadSci(t)
	needModule(t, it, "wasmbox_scitest._core._native")
	sb := newSandbox(t, it, wasmbox.Config{})
	vals := []float64{7.5, -1, 3.25, 9, 0.5, 2}
	res := run(t, sb, fmt.Sprintf(`import sys, wasmbox_scitest as w
from wasmbox_scitest._core import _native
print(sorted(m for m in sys.builtin_module_names if m.startswith("wasmbox_scitest")))
print(_native.__name__, _native.__spec__.origin, _native.spin.__module__, sys.modules[_native.__name__] is _native)
print(w.spin(100000))
print(repr(w.median(%s)))
print(repr(w.dot([1.5, 2.0, -3.0], [4.0, 0.25, 1.0])))`, pyList(vals)))
	want := strings.Join([]string{
		"['wasmbox_scitest._core._native', 'wasmbox_scitest._linalg._lalg']",
		"wasmbox_scitest._core._native built-in wasmbox_scitest._core._native True",
		fmt.Sprint(spin(100000)),
		pyFloat(median(vals)),
		pyFloat(1.5*4.0 + 2.0*0.25 - 3.0),
	}, "\n") + "\n"
	if res.Stdout != want {
		t.Fatalf("stdout\n%s\nwant\n%s\nstderr %s", res.Stdout, want, res.Stderr)
	}
}

// A C loop inside a statically linked extension module stops at the deadline: the instrumentation covers the
// whole binary, extension code included.
func TestSciCLoopDeadline(t *testing.T) {
	it := loadSci(t)
	needModule(t, it, "wasmbox_scitest._core._native")
	sb := newSandbox(t, it, wasmbox.Config{Timeout: time.Second})
	run(t, sb, "import wasmbox_scitest") // warm: the deadline below is the loop's alone
	start := time.Now()
	_, err := sb.Run(context.Background(), "import wasmbox_scitest\nwasmbox_scitest.spin(10**18)")
	elapsed := time.Since(start)
	if !errors.Is(err, wasmbox.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want a deadline stop", err)
	}
	if elapsed > 10*time.Second {
		t.Fatalf("stopped after %v", elapsed)
	}
	// the sandbox still serves runs after the stop
	if res := run(t, sb, "import wasmbox_scitest\nprint(wasmbox_scitest.spin(10))"); res.Stdout != fmt.Sprintln(spin(10)) {
		t.Fatalf("after the stop: %q", res.Stdout)
	}
}

// numpy: the program of the issue, and a numpy C loop stopped at its deadline.
func TestSciNumpy(t *testing.T) {
	it := loadSci(t)
	needModule(t, it, "numpy._core._multiarray_umath")
	sb := newSandbox(t, it, wasmbox.Config{Timeout: 5 * time.Second})
	res := run(t, sb, "import numpy as np; print(np.arange(10).sum(), np.linalg.inv(np.eye(3)))")
	if !strings.HasPrefix(res.Stdout, "45 [[1. 0. 0.]") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	sb2 := newSandbox(t, it, wasmbox.Config{Timeout: time.Second})
	_, err := sb2.Run(context.Background(), "import numpy as np\na = np.ones(10**6)\nwhile True: a.sum()")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("python loop over numpy: err %v", err)
	}
	start := time.Now()
	_, err = sb2.Run(context.Background(), "import numpy as np\nnp.linalg.matrix_power(np.ones((400, 400)), 10**9)")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("numpy C loop: err %v after %v", err, time.Since(start))
	}
}

// pandas: every extension module of the build is a registered builtin under its dotted name. With numpy in the
// build, pandas imports and computes; without it, the modules' own numpy import is what fails.
func TestSciPandas(t *testing.T) {
	it := loadSci(t)
	needModule(t, it, "pandas._libs.lib")
	var want []string
	for _, line := range strings.Split(it.BuildInfo, "\n") {
		if rest, ok := strings.CutPrefix(line, "builtin modules added:"); ok {
			for _, m := range strings.Fields(rest) {
				if strings.HasPrefix(m, "pandas.") {
					want = append(want, m)
				}
			}
		}
	}
	sort.Strings(want)
	sb := newSandbox(t, it, wasmbox.Config{Timeout: 20 * time.Second})
	res := run(t, sb, "import sys\nprint(' '.join(sorted(m for m in sys.builtin_module_names if m.startswith('pandas.'))))")
	if got := strings.TrimSpace(res.Stdout); got != strings.Join(want, " ") {
		t.Fatalf("builtin pandas modules\n%s\nwant\n%s", got, strings.Join(want, " "))
	}
	if strings.Contains(it.BuildInfo, "numpy._core._multiarray_umath") {
		res = run(t, sb, "import pandas as pd\ndf = pd.DataFrame({'k': [1, 2, 1], 'v': [1.0, 2.0, 3.0]})\nprint(df.groupby('k').v.sum().tolist())")
		if strings.TrimSpace(res.Stdout) != "[4.0, 2.0]" {
			t.Fatalf("groupby: %q %s", res.Stdout, res.Stderr)
		}
		return
	}
	res = run(t, sb, `try:
    import pandas._libs.tslibs.base
except ImportError as e:
    print("ImportError", "numpy" in str(e) or "numpy" in repr(e.__cause__) or "numpy" in repr(e.__context__))
else:
    print("imported")`)
	if strings.TrimSpace(res.Stdout) != "ImportError True" {
		t.Fatalf("without numpy: %q %s", res.Stdout, res.Stderr)
	}
}

func pyList(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = pyFloat(x)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// pyFloat formats like Python's repr for the simple values used here.
func pyFloat(x float64) string {
	s := fmt.Sprint(x)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}
