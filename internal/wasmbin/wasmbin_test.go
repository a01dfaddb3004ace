package wasmbin

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/hostfuncs"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

func TestABIConstants(t *testing.T) {
	if TickModule != hostfuncs.ImportModule || TickName != hostfuncs.ImportTick ||
		InterruptExport != hostfuncs.ExportInterrupt || FuelExport != hostfuncs.ExportFuel ||
		StackPointer != hostfuncs.ExportStackPtr || DefaultInterval != hostfuncs.TickInterval {
		t.Error("the ABI constants differ from hostfuncs/abi.go")
	}
}

func mustDecode(t testing.TB, b []byte) *Module {
	t.Helper()
	m, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	for name, b := range map[string][]byte{"kitchen": kitchenSink(), "loops": loopModule(true, true),
		"snap": snapModule(), "env": envModule(), "empty": module()} {
		m := mustDecode(t, b)
		if out := m.Encode(); !bytes.Equal(out, b) {
			t.Errorf("%s: round trip changed the module:\n in  %x\n out %x", name, b, out)
		}
	}
}

func TestDecodeViews(t *testing.T) {
	m := mustDecode(t, kitchenSink())
	var imps []string
	for _, im := range m.Imports() {
		imps = append(imps, im.Module+"."+im.Name)
	}
	if got := strings.Join(imps, " "); got != "env.f wasmbox_v1.tick env.g" {
		t.Errorf("imports %q", got)
	}
	if im := m.Imports()[2]; im.Kind != KindGlobal || im.Global != (GlobalType{I32, false}) {
		t.Errorf("global import %+v", im)
	}
	if m.NumImportedFuncs() != 2 || len(m.Bodies()) != 3 || m.Bodies()[0].Func != 2 {
		t.Errorf("imported funcs %d, bodies %d", m.NumImportedFuncs(), len(m.Bodies()))
	}
	gs := m.Globals()
	if len(gs) != 3 || gs[0].Index != 1 || !gs[0].Mutable || gs[1].Type != I64 || gs[1].Mutable ||
		!bytes.Equal(gs[1].Init, []byte{0x42, 0x7b, 0x0b}) || !bytes.Equal(gs[2].Init, []byte{0x23, 0, 0x0b}) {
		t.Errorf("globals %+v", gs)
	}
	if e, ok := m.Export("t"); !ok || e.Kind != KindTable || len(m.Exports()) != 5 {
		t.Errorf("exports %+v", m.Exports())
	}
	if ft, ok := m.FuncType(1); !ok || len(ft.Params) != 0 || len(ft.Results) != 1 || ft.Results[0] != I32 {
		t.Errorf("type of tick %v", ft)
	}
}

// TestScanAllFamilies checks that every supported opcode is decoded, with the right immediates (a wrong
// immediate length desynchronises the scan, which then fails or misses an opcode).
func TestScanAllFamilies(t *testing.T) {
	m := mustDecode(t, kitchenSink())
	seen := map[Opcode]int{}
	var args []uint64
	err := m.ScanCode(func(fn uint32, in Instr) error {
		if fn == 2 {
			seen[in.Op]++
			if in.Op == 0x41 {
				args = append(args, in.Arg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Opcode{0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x1a, 0x1b,
		0x1c, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x28, 0x2d, 0x37, 0x38, 0x3f, 0x40, 0x41, 0x42, 0x43,
		0x44, 0x6a, 0x79, 0x92, 0x9f, 0xb0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xd0, 0xd1, 0xd2}
	for sub := Opcode(0); sub <= 17; sub++ {
		want = append(want, 0xfc00+sub)
	}
	for _, op := range want {
		if seen[op] == 0 {
			t.Errorf("opcode %#x not seen", op)
		}
	}
	if seen[OpLoop] != 2 || seen[OpEnd] != 6 {
		t.Errorf("loops %d ends %d", seen[OpLoop], seen[OpEnd])
	}
	if !containsU64(args, uint64(math.MaxUint64-123455)) {
		t.Errorf("i32.const -123456 not decoded: %v", args)
	}
}

func containsU64(s []uint64, v uint64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestUnknownOpcode(t *testing.T) {
	for _, tc := range []struct {
		code []byte
		want string
	}{
		{[]byte{0x01, 0xff, 0x0b}, "function 1: offset 0x48: unknown opcode 0xff"},
		{[]byte{0x06, 0x40, 0x0b, 0x0b}, "unknown opcode 0x06"}, // try
		{[]byte{0xfd, 0x0c}, "unsupported opcode 0xfd (SIMD)"},
		{[]byte{0xfc, 0x12, 0x00, 0x0b}, "unknown opcode 0xfc 18"},
		{[]byte{0x02, 0x40, 0x0b}, "unexpected end"},
		{[]byte{0x0b, 0x01}, "1 bytes after the final end"},
	} {
		b := module(
			sec(secType, vecOf(tVoid, tI32)),
			sec(secImport, vecOf(importFunc(TickModule, TickName, 1))),
			sec(secFunction, vecOf(u(0))),
			sec(secExport, vecOf(export(InterruptExport, KindFunc, 1))),
			sec(secCode, vecOf(body(noLocals, tc.code...))))
		m := mustDecode(t, b) // bodies are only decoded on demand
		for i, err := range []error{m.ScanCode(nil), second(Instrument(b, InstrumentOptions{}))} {
			if err == nil || !strings.HasPrefix(err.Error(), "wasmbin: function 1: ") ||
				!strings.Contains(err.Error(), tc.want) {
				t.Errorf("%d %x: got %v, want %q", i, tc.code, err, tc.want)
			}
		}
	}
}

func second[A, B any](_ A, _ B, err error) error { return err }

func TestDecodeErrors(t *testing.T) {
	for name, b := range map[string][]byte{
		"magic":       []byte("\x00asm\x02\x00\x00\x00"),
		"order":       module(sec(secFunction, vecOf()), sec(secType, vecOf())),
		"duplicate":   module(sec(secType, vecOf()), sec(secType, vecOf())),
		"unknown":     module(sec(13, vecOf())),
		"size":        cat(header, []byte{1, 5, 0}),
		"trailing":    module(sec(secType, vecOf(), []byte{0})),
		"bodies":      module(sec(secType, vecOf(tVoid)), sec(secFunction, vecOf(u(0)))),
		"type index":  module(sec(secType, vecOf(tVoid)), sec(secFunction, vecOf(u(1)))),
		"datacount":   module(sec(secDataCount, u(2)), sec(secData, vecOf(cat([]byte{1}, str("a"))))),
		"long leb":    module(sec(secType, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00})),
		"big leb":     module(sec(secType, []byte{0x80, 0x80, 0x80, 0x80, 0x10})),
		"export dup":  module(sec(secExport, vecOf(export("a", KindMemory, 0), export("a", KindMemory, 0)))),
		"bad utf8":    module(sec(secCustom, []byte{1, 0xff})),
		"elem flags":  module(sec(secElement, vecOf([]byte{8}))),
		"global init": module(sec(secGlobal, vecOf([]byte{byte(I32), 0, 0x41, 0}))),
	} {
		if _, err := Decode(b); err == nil || !strings.HasPrefix(err.Error(), "wasmbin: ") {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestLEB(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64} {
		r := &reader{b: appendSLEB(nil, v)}
		if got, err := r.sleb(64); err != nil || got != v || !r.done() {
			t.Errorf("sleb %d: %d %v", v, got, err)
		}
	}
	for _, v := range []uint64{0, 127, 128, math.MaxUint32, math.MaxUint64} {
		r := &reader{b: appendULEB(nil, v)}
		if got, err := r.uleb(64); err != nil || got != v || !r.done() {
			t.Errorf("uleb %d: %d %v", v, got, err)
		}
	}
	// s32 range and padded encodings
	if _, err := (&reader{b: appendSLEB(nil, math.MaxInt32+1)}).sleb(32); err == nil {
		t.Error("s32 accepted 2^31")
	}
	if v, err := (&reader{b: []byte{0xff, 0xff, 0xff, 0xff, 0x7f}}).sleb(32); err != nil || v != -1 {
		t.Errorf("padded -1: %d %v", v, err)
	}
	if v, err := (&reader{b: padded(300)}).u32(); err != nil || v != 300 {
		t.Errorf("padded 300: %d %v", v, err)
	}
}

// newRuntime returns a wazero runtime with a wasmbox_v1.tick host function that counts its calls and
// returns what next returns.
func newRuntime(t *testing.T, ctx context.Context, next func(ctx context.Context, call int) int32) (wazero.Runtime, *int) {
	t.Helper()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(context.Background()) })
	calls := new(int)
	_, err := r.NewHostModuleBuilder(TickModule).NewFunctionBuilder().
		WithFunc(func(ctx context.Context) int32 { *calls++; return next(ctx, *calls) }).Export(TickName).
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r, calls
}

func instantiate(t *testing.T, ctx context.Context, r wazero.Runtime, b []byte, name string) api.Module {
	t.Helper()
	mod, err := r.InstantiateWithConfig(ctx, b, wazero.NewModuleConfig().WithName(name))
	if err != nil {
		t.Fatalf("instantiate %s: %v", name, err)
	}
	return mod
}

func call(t *testing.T, ctx context.Context, mod api.Module, fn string, args ...uint64) uint64 {
	t.Helper()
	res, err := mod.ExportedFunction(fn).Call(ctx, args...)
	if err != nil {
		t.Fatalf("%s: %v", fn, err)
	}
	if len(res) == 0 {
		return 0
	}
	return res[0]
}

func instrument(t *testing.T, b []byte, opts InstrumentOptions) ([]byte, InstrumentStats) {
	t.Helper()
	out, st, err := Instrument(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

func TestInstrumentLayout(t *testing.T) {
	in := loopModule(true, true)
	out, st := instrument(t, in, InstrumentOptions{})
	want := InstrumentStats{Functions: 5, Loops: 4, SizeBefore: len(in), SizeAfter: len(out), TickFunc: 0,
		InterruptFunc: 1, HelperFunc: 6, FuelGlobal: 3, StackPointerExported: true, UnexportedMutableGlobals: 1}
	if st != want {
		t.Errorf("stats %+v\nwant  %+v", st, want)
	}
	seq := CheckSequence(3, 6)
	if want := []byte{0x23, 3, 0x41, 1, 0x6b, 0x24, 3, 0x23, 3, 0x45, 0x04, 0x40, 0x10, 6, 0x0b}; !bytes.Equal(seq, want) {
		t.Errorf("sequence %x", seq)
	}
	if n := bytes.Count(out, seq); n != 4 {
		t.Errorf("%d sequences in the output", n)
	}
	m, mi := mustDecode(t, out), mustDecode(t, in)
	// unchanged parts stay byte-identical: the body without loops, the name section, the memory section
	if !bytes.Equal(m.bodies[4].raw, mi.bodies[4].raw) || !bytes.Equal(m.Sections[len(m.Sections)-1].Payload,
		mi.Sections[len(mi.Sections)-1].Payload) || !bytes.Equal(m.section(secMemory).Payload, mi.section(secMemory).Payload) {
		t.Error("unchanged parts changed")
	}
	if e, ok := m.Export(StackPointer); !ok || e.Index != 1 {
		t.Errorf("__stack_pointer export %+v", e)
	}
	if e, ok := m.Export(FuelExport); !ok || e.Kind != KindGlobal || e.Index != 3 {
		t.Errorf("fuel export %+v", e)
	}
	if g := m.Globals()[3]; !g.Mutable || g.Type != I32 || !bytes.Equal(g.Init, []byte{0x41, 0x90, 0xce, 0x00, 0x0b}) {
		t.Errorf("fuel global %+v", g)
	}
	if _, _, err := Instrument(out, InstrumentOptions{}); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("instrumenting twice: %v", err)
	}
	// Without global names, two unexported mutable i32 globals: no guess.
	_, st = instrument(t, loopModule(false, true), InstrumentOptions{})
	if st.StackPointerExported || st.UnexportedMutableGlobals != 2 {
		t.Errorf("no names: %+v", st)
	}
	_, st = instrument(t, loopModule(true, true), InstrumentOptions{NoExportStackPointer: true})
	if st.StackPointerExported {
		t.Error("NoExportStackPointer ignored")
	}
}

func TestInstrumentErrors(t *testing.T) {
	noTick := snapModule()
	if _, _, err := Instrument(noTick, InstrumentOptions{}); err == nil || !strings.Contains(err.Error(), "wasmbox_v1.tick") {
		t.Errorf("no tick import: %v", err)
	}
	noInterrupt := module(
		sec(secType, vecOf(tI32)),
		sec(secImport, vecOf(importFunc(TickModule, TickName, 0))))
	if _, _, err := Instrument(noInterrupt, InstrumentOptions{}); err == nil || !strings.Contains(err.Error(), InterruptExport) {
		t.Errorf("no interrupt export: %v", err)
	}
	badTick := module(
		sec(secType, vecOf(tVoid)),
		sec(secImport, vecOf(importFunc(TickModule, TickName, 0))))
	if _, _, err := Instrument(badTick, InstrumentOptions{}); err == nil || !strings.Contains(err.Error(), "() -> i32") {
		t.Errorf("tick type: %v", err)
	}
	if _, _, err := Instrument(loopModule(true, true), InstrumentOptions{Interval: -1}); err == nil {
		t.Error("negative interval accepted")
	}
}

func TestInstrumentRuns(t *testing.T) {
	ctx := context.Background()
	orig := loopModule(true, true)
	for _, tc := range []struct {
		name     string
		interval int32
		tick     int32 // tick's result
		n        uint64
		calls    int
		fuel     uint64
		irq      uint64
	}{
		{"default", 0, 10000, 25000, 2, 5000, 0},
		{"interval 1000", 1000, 1000, 25000, 25, 1000, 0},
		{"zero means interval", 1000, 0, 25000, 25, 1000, 0},
		{"tick sets the next interval", 10000, 3000, 25000, 6, 3000, 0}, // at 10000, 13000, ..., 25000
		{"negative interrupts", 10000, -500, 25000, 31, 500, 31},
		{"min int32", 1000, math.MinInt32, 2500, 2, 500, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := instrument(t, orig, InstrumentOptions{Interval: tc.interval})
			r, calls := newRuntime(t, ctx, func(context.Context, int) int32 { return tc.tick })
			mod := instantiate(t, ctx, r, out, "m")
			if got := call(t, ctx, mod, "count", tc.n); got != tc.n {
				t.Errorf("count returned %d", got)
			}
			fuel := mod.ExportedGlobal(FuelExport).Get()
			irq := mod.ExportedGlobal("interrupts").Get()
			if *calls != tc.calls || fuel != tc.fuel || irq != tc.irq {
				t.Errorf("tick calls %d fuel %d interrupts %d, want %d %d %d", *calls, fuel, irq, tc.calls, tc.fuel, tc.irq)
			}
			if sp := mod.ExportedGlobal(StackPointer).Get(); sp != 65536 {
				t.Errorf("__stack_pointer %d", sp)
			}
		})
	}

	for _, param := range []bool{false, true} {
		t.Run(fmt.Sprintf("branch depths unchanged, param %v", param), func(t *testing.T) {
			orig := loopModule(true, param)
			out, _ := instrument(t, orig, InstrumentOptions{Interval: 7})
			r, calls := newRuntime(t, ctx, func(context.Context, int) int32 { return 7 })
			want := call(t, ctx, instantiate(t, ctx, r, orig, "orig"), "nested", 100)
			got := call(t, ctx, instantiate(t, ctx, r, out, "inst"), "nested", 100)
			if want != 166650 || got != want {
				t.Errorf("nested(100): original %d, instrumented %d", want, got)
			}
			// loop entries: 101 outer + sum(i+1 for i < 100) = 5151 inner
			if *calls != 5151/7 {
				t.Errorf("%d tick calls, want %d", *calls, 5151/7)
			}
		})
	}

	t.Run("host stops an endless loop", func(t *testing.T) {
		out, _ := instrument(t, orig, InstrumentOptions{})
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		r, calls := newRuntime(t, ctx, func(ctx context.Context, _ int) int32 {
			if ctx.Err() != nil {
				panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
			}
			return 10000
		})
		mod := instantiate(t, ctx, r, out, "m")
		start := time.Now()
		_, err := mod.ExportedFunction("spin").Call(dctx)
		var exit *sys.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
			t.Fatalf("spin returned %v", err)
		}
		if d := time.Since(start); d > 5*time.Second || *calls < 2 {
			t.Errorf("stopped after %v and %d tick calls", d, *calls)
		}
	})

	t.Run("kitchen sink", func(t *testing.T) {
		out, st := instrument(t, kitchenSink(), InstrumentOptions{Interval: 1})
		if st.Loops != 2 || st.HelperFunc != 5 || st.FuelGlobal != 4 {
			t.Errorf("stats %+v", st)
		}
		r, calls := newRuntime(t, ctx, func(context.Context, int) int32 { return 1 })
		instantiate(t, ctx, r, envModule(), "env")
		for _, b := range [][]byte{kitchenSink(), out} {
			mod := instantiate(t, ctx, r, b, "")
			call(t, ctx, mod, "all")
			if got := mod.ExportedGlobal("g").Get(); got != 0 {
				t.Errorf("g = %d", got)
			}
		}
		if *calls != 2 {
			t.Errorf("%d tick calls", *calls)
		}
	})
}

func TestRewriteForSnapshot(t *testing.T) {
	ctx := context.Background()
	in := snapModule()
	globals := map[string]uint64{StackPointer: 5000, "g64": 1 << 40, "gf": math.Float64bits(2.5), "neg": 0xffffffff}
	out, err := RewriteForSnapshot(in, globals, 3, []string{"_initialize"})
	if err != nil {
		t.Fatal(err)
	}
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	orig := instantiate(t, ctx, r, in, "orig")
	if got := call(t, ctx, orig, "peek"); got != '*' {
		t.Fatalf("original peek %d", got)
	}
	mod := instantiate(t, ctx, r, out, "snap")
	if got := call(t, ctx, mod, "peek"); got != 0 {
		t.Errorf("peek %d: data segment still applied", got)
	}
	if size := mod.ExportedMemory("memory").Size(); size != 3*65536 {
		t.Errorf("memory size %d", size)
	}
	for name, v := range globals {
		if got := mod.ExportedGlobal(name).Get(); got != v {
			t.Errorf("global %s = %#x, want %#x", name, got, v)
		}
	}
	if mod.ExportedFunction("_initialize") != nil {
		t.Error("_initialize still exported")
	}
	m, mi := mustDecode(t, out), mustDecode(t, in)
	if m.section(secData) != nil || m.section(secDataCount) != nil {
		t.Error("data sections left")
	}
	if !bytes.Equal(m.section(secCode).Payload, mi.section(secCode).Payload) ||
		!bytes.Equal(m.section(secType).Payload, mi.section(secType).Payload) ||
		!bytes.Equal(m.Globals()[4].raw, mi.Globals()[4].raw) {
		t.Error("unchanged parts changed")
	}
	if l := m.memories[0]; l != (Limits{Min: 3, Max: 10, HasMax: true}) {
		t.Errorf("limits %+v", l)
	}
	// no change requested: only the data sections go, and the reset section (TestResetSection) comes
	out, err = RewriteForSnapshot(in, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(mustDecode(t, out).Sections) != len(mi.Sections)-2+1 {
		t.Error("sections")
	}

	for _, tc := range []struct {
		in      []byte
		globals map[string]uint64
		pages   uint32
		drop    []string
		want    string
	}{
		{kitchenSink(), nil, 0, nil, "function 2 uses memory.init at offset"},
		{in, map[string]uint64{"nope": 1}, 0, nil, `no exported global "nope"`},
		{in, map[string]uint64{"peek": 1}, 0, nil, `no exported global "peek"`},
		{in, nil, 11, nil, "above the maximum 10"},
		{in, nil, 0, []string{"nope"}, `no export "nope"`},
	} {
		if _, err := RewriteForSnapshot(tc.in, tc.globals, tc.pages, tc.drop); err == nil ||
			!strings.HasPrefix(err.Error(), "wasmbin: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

func TestRewriteForSnapshotImportedMemory(t *testing.T) {
	in := module(sec(secType, vecOf(tI32)), sec(secImport, vecOf(
		importFunc(TickModule, TickName, 0),
		cat(str("env"), str("memory"), []byte{byte(KindMemory), 1, 1, 20}))))
	out, err := RewriteForSnapshot(in, nil, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	im := mustDecode(t, out).Imports()
	if im[1].Limits != (Limits{Min: 7, Max: 20, HasMax: true}) || im[0].Name != TickName {
		t.Errorf("imports %+v", im)
	}
}

// TestWasmOpt validates the test modules and the rewrites' output with binaryen, if it is installed.
func TestWasmOpt(t *testing.T) {
	path, err := exec.LookPath("wasm-opt")
	if err != nil {
		t.Skip("wasm-opt not on PATH: skipping the extra validation")
	}
	dir := t.TempDir()
	validate := func(name string, b []byte) error {
		f := filepath.Join(dir, name+".wasm")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(path, "--enable-bulk-memory", "--enable-sign-ext", "--enable-mutable-globals",
			"--enable-nontrapping-float-to-int", "--enable-reference-types", "--enable-multivalue",
			f, "-o", filepath.Join(dir, name+".out.wasm")).CombinedOutput()
		if err != nil {
			return errors.New(string(out))
		}
		return nil
	}
	broken := module(sec(secType, vecOf(tVoid)), sec(secFunction, vecOf(u(0))),
		sec(secCode, vecOf(body(noLocals, 0x6a, 0x0b)))) // i32.add on an empty stack
	if validate("broken", broken) == nil {
		t.Fatal("wasm-opt accepted a broken module")
	}
	// binaryen 108 does not know table.fill, table.init, elem.drop, table.copy: replace them with nops.
	kitchen108 := kitchenSink()
	for _, seq := range [][]byte{
		{0x41, 0x00, 0xd0, 0x70, 0x41, 0x00, 0xfc, 0x11, 0x00},
		{0x41, 0x00, 0x41, 0x00, 0x41, 0x01, 0xfc, 0x0c, 0x01, 0x00},
		{0xfc, 0x0d, 0x01},
		{0x41, 0x00, 0x41, 0x01, 0x41, 0x01, 0xfc, 0x0e, 0x00, 0x01},
	} {
		if i := bytes.Index(kitchen108, seq); i < 0 {
			t.Fatalf("%x not found", seq)
		} else {
			copy(kitchen108[i:], bytes.Repeat([]byte{0x01}, len(seq)))
		}
	}
	kitchen, _ := instrument(t, kitchen108, InstrumentOptions{})
	loops, _ := instrument(t, loopModule(true, false), InstrumentOptions{})
	snap, err := RewriteForSnapshot(snapModule(), map[string]uint64{"gf": 1}, 4, []string{"_initialize"})
	if err != nil {
		t.Fatal(err)
	}
	bulk, _ := instrument(t, bulkModule(bulkPages), InstrumentOptions{})
	bulkSnap, err := RewriteForSnapshot(bulk, map[string]uint64{FuelExport: 7}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"kitchen": kitchen108, "kitchen-instrumented": kitchen,
		"loops-instrumented": loops, "loops": loopModule(true, false), "snapshot": snap, "bulk": bulkModule(bulkPages),
		"bulk-instrumented": bulk, "bulk-snapshot": bulkSnap} {
		if err := validate(name, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPythonWasm round-trips and instruments the real interpreter when assets/python.wasm.gz exists.
func gunzipFile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPythonWasm checks the real interpreter: the shipped python.wasm is exactly the instrumentation of the shipped
// uninstrumented build (so the rewrite is reproducible and nothing else changed), both round-trip byte for byte,
// every instruction scans, only WASI and our import module are imported, and wazero compiles the result.
func TestPythonWasm(t *testing.T) {
	const shipped, plain = "../../assets/python.wasm.gz", "../../assets/uninstrumented/python.wasm.gz"
	for _, p := range []string{shipped, plain} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Skipf("%s not built yet (absent or an empty placeholder)", p)
		}
	}
	in := gunzipFile(t, plain)
	want := gunzipFile(t, shipped)
	for _, b := range [][]byte{in, want} {
		m := mustDecode(t, b)
		if !bytes.Equal(m.Encode(), b) {
			t.Fatal("round trip changed python.wasm")
		}
		if err := m.ScanCode(nil); err != nil {
			t.Fatal(err)
		}
		for _, im := range m.Imports() {
			if im.Module != "wasi_snapshot_preview1" && im.Module != TickModule {
				t.Errorf("unexpected import %s.%s", im.Module, im.Name)
			}
		}
	}
	out, st, err := Instrument(in, InstrumentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	if st.Loops <= 5000 {
		t.Errorf("only %d loops", st.Loops)
	}
	if !bytes.Equal(out, want) {
		t.Fatal("Instrument(uninstrumented) differs from the shipped python.wasm")
	}
	if _, _, err := Instrument(want, InstrumentOptions{}); err == nil {
		t.Error("instrumenting the instrumented interpreter again succeeded")
	}
	if testing.Short() {
		return
	}
	r := wazero.NewRuntime(context.Background())
	defer r.Close(context.Background())
	if _, err := r.CompileModule(context.Background(), out); err != nil {
		t.Fatalf("wazero rejects the instrumented interpreter: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, b := range [][]byte{kitchenSink(), loopModule(true, true), snapModule(), envModule(), module()} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		if !bytes.Equal(m.Encode(), b) {
			t.Fatal("round trip changed the module")
		}
		_ = m.ScanCode(func(uint32, Instr) error { return nil })
		if out, _, err := Instrument(b, InstrumentOptions{}); err == nil {
			if _, err := Decode(out); err != nil {
				t.Fatalf("Instrument output does not decode: %v", err)
			}
		}
		if out, err := RewriteForSnapshot(b, nil, 1, nil); err == nil {
			if _, err := Decode(out); err != nil {
				t.Fatalf("RewriteForSnapshot output does not decode: %v", err)
			}
		}
	})
}

// TestResetSection: the rewrite records the mutable globals of a module whose instances can be reset, and
// records nothing when one of its conditions fails.
func TestResetSection(t *testing.T) {
	out, err := RewriteForSnapshot(snapModule(), nil, 0, []string{"_initialize"})
	if err != nil {
		t.Fatal(err)
	}
	names, ok := ResetGlobals(out)
	if want := []string{StackPointer, "g64", "gf", "neg"}; !ok || strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("ResetGlobals = %q, %v; want %q", names, ok, want)
	}
	if _, ok := ResetGlobals(snapModule()); ok {
		t.Error("a module never rewritten has the section")
	}
	if m := mustDecode(t, out); m.Sections[len(m.Sections)-1].Name != ResetSection {
		t.Error("the section is not the last one")
	}

	memory := sec(secMemory, vecOf([]byte{0, 1}))
	cases := map[string][]byte{
		"a mutable global that is not exported": module(sec(secType, vecOf(tVoid)), memory,
			sec(secGlobal, vecOf(globalI32(true, 1), globalI32(true, 2))),
			sec(secExport, vecOf(export("g0", KindGlobal, 0)))),
		"a mutable global exported only under a dropped name": module(sec(secType, vecOf(tVoid)), memory,
			sec(secGlobal, vecOf(globalI32(true, 1))),
			sec(secExport, vecOf(export("drop_me", KindGlobal, 0)))),
		"table.set": module(sec(secType, vecOf(tVoid)), sec(secFunction, vecOf(u(0))),
			sec(secTable, vecOf([]byte{0x70, 0, 1})), memory,
			sec(secCode, vecOf(body(noLocals, 0x41, 0x00, 0xd0, 0x70, 0x26, 0x00, 0x0b)))),
		"table.grow": module(sec(secType, vecOf(tVoid)), sec(secFunction, vecOf(u(0))),
			sec(secTable, vecOf([]byte{0x70, 0, 1})), memory,
			sec(secCode, vecOf(body(noLocals, 0xd0, 0x70, 0x41, 0x01, 0xfc, 0x0f, 0x00, 0x1a, 0x0b)))),
		"an imported table": module(sec(secType, vecOf(tVoid)),
			sec(secImport, vecOf(cat(str("env"), str("table"), []byte{byte(KindTable), 0x70, 0, 1}))), memory),
		"an imported memory": module(sec(secType, vecOf(tVoid)),
			sec(secImport, vecOf(cat(str("env"), str("memory"), []byte{byte(KindMemory), 0, 1})))),
		"an imported mutable global": module(sec(secType, vecOf(tVoid)),
			sec(secImport, vecOf(cat(str("env"), str("g"), []byte{byte(KindGlobal), byte(I32), 1}))), memory),
		"no memory": module(sec(secType, vecOf(tVoid))),
	}
	for name, in := range cases {
		mustDecode(t, in)
		out, err := RewriteForSnapshot(in, nil, 0, map[bool][]string{true: {"drop_me"}}[strings.Contains(name, "dropped")])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if names, ok := ResetGlobals(out); ok {
			t.Errorf("%s: section written (%q)", name, names)
		}
	}
	// A well-formed module whose section is cut short or padded is not trusted.
	bad := module(memory, custom(ResetSection, u(2), str("a")))
	if _, ok := ResetGlobals(bad); ok {
		t.Error("a short section was accepted")
	}
	bad = module(memory, custom(ResetSection, u(1), str("a"), []byte{0}))
	if _, ok := ResetGlobals(bad); ok {
		t.Error("a section with trailing bytes was accepted")
	}
	if _, ok := ResetGlobals([]byte("\x00asm\x01\x00\x00\x00\x00\x7f")); ok {
		t.Error("a truncated module was accepted")
	}
}
