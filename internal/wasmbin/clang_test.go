package wasmbin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

const clangSource = `
__attribute__((import_module("wasmbox_v1"), import_name("tick"))) int tick(void);
int interrupts;
__attribute__((export_name("wasmbox_interrupt"))) void wasmbox_interrupt(void) { interrupts++; }
__attribute__((export_name("keep"))) int keep(void) { return tick(); }
static void fill(volatile unsigned char *p, unsigned n) { for (unsigned i = 0; i < n; i++) p[i] = (unsigned char)(i * 7); }
__attribute__((noinline)) static unsigned sum(const volatile unsigned char *p, unsigned n) {
	unsigned s = 0;
	for (unsigned i = 0; i < n; i++) s = s * 31 + p[i];
	return s;
}
__attribute__((export_name("work"))) unsigned work(unsigned n) {
	volatile unsigned char buf[256]; /* on the stack: uses __stack_pointer */
	unsigned h = 0;
	for (unsigned k = 0; k < n; k++) { fill(buf, 256); h += sum(buf, 256) + k; }
	return h;
}
`

// TestClang instruments what clang-19 makes of a small C file, if clang-19 is installed, and checks that the
// result computes the same as the original while calling tick.
func TestClang(t *testing.T) {
	clang, err := exec.LookPath("clang-19")
	if err != nil {
		t.Skip("clang-19 not on PATH")
	}
	dir := t.TempDir()
	src, wasm := filepath.Join(dir, "t.c"), filepath.Join(dir, "t.wasm")
	if err := os.WriteFile(src, []byte(clangSource), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(clang, "--target=wasm32", "-O2", "-nostdlib", "-mbulk-memory", "-msign-ext",
		"-mnontrapping-fptoint", "-mmultivalue", "-mreference-types", "-Wl,--no-entry", "-o", wasm, src).CombinedOutput()
	if err != nil {
		t.Skipf("clang-19 cannot link wasm32 here: %v\n%s", err, out)
	}
	orig, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// With interval 1 tick counts the loop iterations; with 1000 it must be called a thousandth as often.
	var iterations int
	for _, interval := range []int32{1, 1000} {
		inst, st := instrument(t, orig, InstrumentOptions{Interval: interval})
		if st.Loops < 2 || !st.StackPointerExported || st.UnexportedMutableGlobals != 0 {
			t.Errorf("stats %+v", st)
		}
		r, calls := newRuntime(t, ctx, func(context.Context, int) int32 { return 0 })
		want := call(t, ctx, instantiate(t, ctx, r, orig, "orig"), "work", 100)
		mod := instantiate(t, ctx, r, inst, "inst")
		sp := mod.ExportedGlobal(StackPointer).Get()
		if got := call(t, ctx, mod, "work", 100); got != want {
			t.Errorf("work(100) = %d, want %d", got, want)
		}
		if got := mod.ExportedGlobal(StackPointer).Get(); got != sp {
			t.Errorf("__stack_pointer %d after the call, %d before", got, sp)
		}
		if interval == 1 {
			iterations = *calls
			t.Logf("%d loop iterations", iterations)
			if iterations < 100 {
				t.Errorf("%d iterations", iterations)
			}
		} else if *calls != iterations/1000 {
			t.Errorf("%d tick calls for %d iterations", *calls, iterations)
		}
	}
}
