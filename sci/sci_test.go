package sci

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/internal/testcache"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// TestMain gives the tests a temporary cache: they never read or write the user's.
func TestMain(m *testing.M) { testcache.Main(m) }

// One sandbox with the runtime's defaults serves the tests that need no special limits: compiling the 38 MB
// interpreter is the slow part, and it happens once per process.
var (
	sharedOnce sync.Once
	shared     *wasmbox.Sandbox
	sharedErr  error
)

func sharedSandbox(t *testing.T) *wasmbox.Sandbox {
	t.Helper()
	sharedOnce.Do(func() {
		shared, sharedErr = wasmbox.New(context.Background(), wasmbox.Config{Runtime: Name, Timeout: 60 * time.Second})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func newSandbox(t *testing.T, cfg wasmbox.Config) *wasmbox.Sandbox {
	t.Helper()
	cfg.Runtime = Name
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

// The embedded artifacts are checked: a flipped byte in any of them, a missing or malformed checksum line, is an
// error naming the file, never a different interpreter.
func TestLoadVerifies(t *testing.T) {
	it, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(it.Wasm) < 30<<20 || len(it.Stdlib) == 0 || len(it.TZData) == 0 || !strings.Contains(it.BuildInfo, "pandas") {
		t.Fatalf("loaded wasm %d B, stdlib %d B, tzdata %d B", len(it.Wasm), len(it.Stdlib), len(it.TZData))
	}
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 1; return c }
	for name, args := range map[string][4][]byte{
		"python.wasm.gz": {flip(pythonWasmGz, len(pythonWasmGz)/2), stdlibZip, buildInfo, sha256sums},
		"stdlib.zip":     {pythonWasmGz, flip(stdlibZip, 100), buildInfo, sha256sums},
		"BUILDINFO":      {pythonWasmGz, stdlibZip, flip(buildInfo, 0), sha256sums},
	} {
		_, err := load(args[0], args[1], args[2], args[3])
		if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s corrupted: err %v", name, err)
		}
	}
	noWasm := bytes.ReplaceAll(sha256sums, []byte("  python.wasm\n"), []byte("  other.wasm\n"))
	if _, err := load(pythonWasmGz, stdlibZip, buildInfo, noWasm); err == nil || !strings.Contains(err.Error(), "does not list python.wasm") {
		t.Errorf("python.wasm unlisted: err %v", err)
	}
	if _, err := load(pythonWasmGz, stdlibZip, buildInfo, []byte("abc python.wasm\n")); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("malformed line: err %v", err)
	}
}

// Importing the package registers the runtime; Config.Runtime selects it, its default Preload imports numpy and
// pandas before the snapshot, and an explicit Preload replaces that default.
func TestRuntimeSelection(t *testing.T) {
	if !strings.Contains(strings.Join(assets.Runtimes(), " "), Name) {
		t.Fatalf("runtimes %v", assets.Runtimes())
	}
	sb := sharedSandbox(t)
	if info := sb.Info(); info.Runtime != Name {
		t.Fatalf("Info.Runtime %q", info.Runtime)
	}
	res := run(t, sb, "import sys\nprint('numpy' in sys.modules, 'pandas' in sys.modules)\nimport numpy, pandas\nprint(numpy.__version__, pandas.__version__)")
	if res.Stdout != "True True\n2.2.4 2.2.3\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	bare := newSandbox(t, wasmbox.Config{Preload: []string{}})
	if res := run(t, bare, "import sys\nprint('numpy' in sys.modules)"); res.Stdout != "False\n" {
		t.Fatalf("Preload []: %q", res.Stdout)
	}
	_, err := wasmbox.New(context.Background(), wasmbox.Config{Runtime: Name, Interpreter: &assets.Interpreter{}})
	if !errors.Is(err, wasmbox.ErrInvalidConfig) {
		t.Fatalf("Runtime and Interpreter both set: %v", err)
	}
}

// The analysis program prints what native numpy and pandas print for it (same sources, built natively).
func TestAnalysisMatchesNative(t *testing.T) {
	prog, err := os.ReadFile("testdata/analysis.py")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/analysis.native.txt")
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, sharedSandbox(t), string(prog))
	if res.Stdout != string(want) {
		gl, wl := strings.Split(res.Stdout, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("line %d\n sandbox: %s\n native:  %s", i+1, g, w)
			}
		}
		t.Fatalf("stderr: %s", res.Stderr)
	}
}

// Limits hold inside numpy's and pandas' C code: a C loop ends at the deadline, an allocation over the memory cap
// is a MemoryError the program can catch, and the sandbox serves the next run.
func TestLimits(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Timeout: 2 * time.Second, MemoryLimit: 256 << 20})
	start := time.Now()
	_, err := sb.Run(context.Background(), "import numpy as np\nnp.linalg.matrix_power(np.ones((400, 400)), 10**9)")
	if !errors.Is(err, wasmbox.ErrTimeout) || time.Since(start) > 20*time.Second {
		t.Fatalf("numpy C loop: err %v after %v", err, time.Since(start))
	}
	_, err = sb.Run(context.Background(), "import pandas as pd, numpy as np\ns = pd.Series(np.arange(10**6))\nwhile True: s.rolling(1000).median()")
	if !errors.Is(err, wasmbox.ErrTimeout) {
		t.Fatalf("pandas loop: err %v", err)
	}
	res := run(t, sb, `import numpy as np
try:
    np.ones(10**8)  # 800 MB under a 256 MiB cap
except MemoryError as e:
    print("MemoryError")
try:
    np.ones(10**9)  # 8 GB: more than a 32-bit address space, as on any 32-bit platform
except ValueError as e:
    print("ValueError", "too big" in str(e))
print(np.ones(10**6).sum())`)
	if res.Stdout != "MemoryError\nValueError True\n1000000.0\n" {
		t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
	}
}

// A C++ exception (here operator new failing inside numpy's pocketfft, which natively becomes a MemoryError)
// ends the run with an error and the reason on stderr; the host and the next run are unaffected.
func TestCxxThrowEndsRun(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{MemoryLimit: 256 << 20, Timeout: 30 * time.Second})
	res, err := sb.Run(context.Background(), "import numpy as np\na = np.ones(6_000_000, dtype=complex)\nnp.fft.fft(a)")
	if err == nil {
		t.Fatalf("no error; stdout %q", res.Stdout)
	}
	if res == nil || !strings.Contains(res.Stderr, "C++ exception") {
		t.Fatalf("err %v, stderr %v", err, res)
	}
	if res := run(t, sb, "import numpy as np\nprint(np.fft.rfft(np.ones(8)).real.tolist())"); res.Stdout != "[8.0, 0.0, 0.0, 0.0, 0.0]\n" {
		t.Fatalf("after: %q", res.Stdout)
	}
}
