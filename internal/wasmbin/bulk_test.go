package wasmbin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

const bulkMem = bulkPages << 16

// pattern fills the memory with bytes that differ from their neighbours, so a shifted or partial copy shows.
func pattern(t *testing.T, mod api.Module) {
	t.Helper()
	b := make([]byte, bulkMem)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	if !mod.Memory().Write(0, b) {
		t.Fatal("write pattern")
	}
}

func memory(t *testing.T, mod api.Module) []byte {
	t.Helper()
	b, ok := mod.Memory().Read(0, bulkMem)
	if !ok {
		t.Fatal("read memory")
	}
	return append([]byte(nil), b...)
}

type bulkCase struct {
	fn      string
	a, b, n uint64 // dst, src or value, length
}

// TestInstrumentBulkSemantics checks that the chunked replacements of memory.copy and memory.fill leave exactly
// the memory the instructions leave, overlapping copies in both directions included, and that an
// out-of-bounds operation traps before writing anything, as the instruction does.
func TestInstrumentBulkSemantics(t *testing.T) {
	ctx := context.Background()
	in := bulkModule(bulkPages)
	out, st := instrument(t, in, InstrumentOptions{})
	if st.BulkCopies != 3 || st.BulkFills != 1 || st.BulkShort != 1 || st.HelperFunc != 6 || st.CopyFunc != 7 ||
		st.FillFunc != 8 {
		t.Fatalf("stats %+v", st)
	}
	m := mustDecode(t, out)
	if len(m.Types()) != len(mustDecode(t, in).Types()) {
		t.Error("a type was added although (i32 i32 i32) -> () exists")
	}
	// The scratch locals come after the parameters and locals: copy and fill have 3 parameters, spin 1, short
	// none and one i64 local, so its scratch locals start at 1 too.
	for _, seq := range []struct {
		b []byte
		n int
	}{
		{BulkSequence(false, 3, st.FuelGlobal, st.HelperFunc, st.CopyFunc), 1},
		{BulkSequence(true, 3, st.FuelGlobal, st.HelperFunc, st.FillFunc), 1},
		{BulkSequence(false, 1, st.FuelGlobal, st.HelperFunc, st.CopyFunc), 2}, // spin, short
		{[]byte{0x41, 0xff, 0x01, 0xfc, 0x0a, 0x00, 0x00}, 1},                  // the short copy, unchanged
	} {
		if n := bytes.Count(out, seq.b); n != seq.n {
			t.Errorf("%x: %d times", seq.b, n)
		}
	}
	for _, fn := range []uint32{2, 3, 4, 5} {
		want := []byte{1, 3, byte(I32)}
		if fn == 5 {
			want = []byte{2, 1, byte(I64), 3, byte(I32)}
		}
		if b := m.Bodies()[fn-1]; !bytes.Equal(b.Code[:b.Expr], want) {
			t.Errorf("function %d: locals %x, want %x", fn, b.Code[:b.Expr], want)
		}
	}

	r, _ := newRuntime(t, ctx, func(context.Context, int) int32 { return 0 })
	orig, inst := instantiate(t, ctx, r, in, "orig"), instantiate(t, ctx, r, out, "inst")
	const c = BulkChunk
	ok := []bulkCase{
		{"copy", 100, 0, 0}, {"copy", 100, 3, 77}, {"copy", 5, 9, c}, {"copy", 9, 5, c},
		{"copy", 1 << 20, 12345, c + 1},         // forward, no overlap
		{"copy", 1000, 0, 5*c/2 + 3},            // dst > src, overlapping: backwards
		{"copy", 0, 1000, 5*c/2 + 3},            // dst < src, overlapping: forwards
		{"copy", 7, 7, 3 * c},                   // dst == src
		{"copy", 3, 1, bulkMem - 3},             // up to the last byte, 2 apart
		{"copy", 0, bulkMem - 2*c - 5, 2*c + 5}, // the source ends at the end of memory
		{"copy", bulkMem - 4*c, 17, 4 * c},      // the destination ends there
		{"fill", 3, 0xab, 3*c + 11}, {"fill", 0, 0x11, bulkMem}, {"fill", 11, 1, 12},
	}
	bad := []bulkCase{ // traps: out of bounds
		{"copy", 1, 0, bulkMem}, {"copy", 0, 1, bulkMem}, {"copy", 0, 0, bulkMem + 1},
		{"copy", 0, 0xffffffff, 2 * c}, {"copy", 0xffffffff, 0, 2 * c}, {"copy", 0, 0, 0xffffffff},
		{"copy", 10, 0, c + 1 + bulkMem - 10 - c}, // one byte past the end, dst > src
		{"fill", 1, 0xcc, bulkMem}, {"fill", 0xffffff00, 2, 2 * c}, {"copy", bulkMem + 1, 0, 0},
	}
	for _, tc := range append(ok, bad...) {
		pattern(t, orig)
		pattern(t, inst)
		_, errO := orig.ExportedFunction(tc.fn).Call(ctx, tc.a, tc.b, tc.n)
		_, errI := inst.ExportedFunction(tc.fn).Call(ctx, tc.a, tc.b, tc.n)
		if (errO == nil) != (errI == nil) {
			t.Errorf("%+v: original %v, instrumented %v", tc, errO, errI)
			continue
		}
		if errI != nil && !strings.Contains(errI.Error(), "out of bounds") {
			t.Errorf("%+v: instrumented trap %v", tc, errI)
		}
		if !bytes.Equal(memory(t, orig), memory(t, inst)) {
			t.Errorf("%+v: the memories differ", tc)
		}
	}
	for i, tc := range bad {
		if _, err := orig.ExportedFunction(tc.fn).Call(ctx, tc.a, tc.b, tc.n); err == nil {
			t.Errorf("bad case %d did not trap", i)
		}
	}
}

// TestInstrumentBulkCharges checks that copies and fills cost the counter one unit per 1<<BulkShift bytes, charged
// per chunk and before the chunk is written, so a host that stops the run at a tick stops it before the write.
func TestInstrumentBulkCharges(t *testing.T) {
	ctx := context.Background()
	const big = 1 << 30
	t.Run("charged by length", func(t *testing.T) {
		out, _ := instrument(t, bulkModule(bulkPages), InstrumentOptions{Interval: big})
		r, calls := newRuntime(t, ctx, func(context.Context, int) int32 { return big })
		mod := instantiate(t, ctx, r, out, "m")
		fuel := func() uint64 { return mod.ExportedGlobal(FuelExport).Get() }
		want := uint64(big)
		call(t, ctx, mod, "short") // 255 bytes free, 256 one unit
		if want--; fuel() != want {
			t.Errorf("short: counter %d, want %d", fuel(), want)
		}
		for _, tc := range []bulkCase{{"copy", 0, 100, 255}, {"copy", 0, 100, 256}, {"fill", 9, 1, 1000},
			{"copy", 1000, 0, 5*BulkChunk/2 + 300}, {"copy", 0, 1000, 3 * BulkChunk}, {"fill", 0, 2, 2*BulkChunk + 1}} {
			call(t, ctx, mod, tc.fn, tc.a, tc.b, tc.n)
			for n := tc.n; n > 0; n -= min(n, BulkChunk) {
				want -= min(n, BulkChunk) >> BulkShift
			}
			if got := fuel(); got != want {
				t.Errorf("%+v: counter %d, want %d", tc, got, want)
			}
		}
		if *calls != 0 {
			t.Errorf("%d ticks", *calls)
		}
	})

	t.Run("a tick per chunk", func(t *testing.T) {
		// every chunk costs BulkChunk>>BulkShift units, more than the interval: one tick each
		out, _ := instrument(t, bulkModule(bulkPages), InstrumentOptions{Interval: 100})
		r, calls := newRuntime(t, ctx, func(context.Context, int) int32 { return 0 })
		mod := instantiate(t, ctx, r, out, "m")
		call(t, ctx, mod, "copy", 1000, 0, 5*BulkChunk/2)
		call(t, ctx, mod, "copy", 0, 1000, 5*BulkChunk/2)
		call(t, ctx, mod, "fill", 0, 1, 4*BulkChunk)
		if *calls != 3+3+4 {
			t.Errorf("%d ticks, want 10", *calls)
		}
		call(t, ctx, mod, "copy", 0, 1000, 99<<BulkShift) // 99 units: the counter stays at 1
		if *calls != 10 || mod.ExportedGlobal(FuelExport).Get() != 1 {
			t.Errorf("%d ticks, counter %d", *calls, mod.ExportedGlobal(FuelExport).Get())
		}
	})

	t.Run("the host stops before the write", func(t *testing.T) {
		out, _ := instrument(t, bulkModule(bulkPages), InstrumentOptions{Interval: 100})
		r, _ := newRuntime(t, ctx, func(context.Context, int) int32 { panic(sys.NewExitError(3)) })
		mod := instantiate(t, ctx, r, out, "m")
		for _, tc := range []bulkCase{{"copy", 1000, 0, 3 * BulkChunk}, {"copy", 0, 1000, 3 * BulkChunk},
			{"fill", 0, 0xee, 3 * BulkChunk}, {"copy", 0, 1000, 200 << BulkShift}} {
			pattern(t, mod)
			before := memory(t, mod)
			_, err := mod.ExportedFunction(tc.fn).Call(ctx, tc.a, tc.b, tc.n)
			var exit *sys.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 3 {
				t.Fatalf("%+v: %v", tc, err)
			}
			if !bytes.Equal(before, memory(t, mod)) {
				t.Errorf("%+v: memory written before the tick", tc)
			}
			mod = instantiate(t, ctx, r, out, "") // the stopped instance is closed
		}
	})

	// An endless loop of one big copy per iteration: the loop header alone ticks every 10,000 iterations,
	// 640 GB of copying; charged by length, every iteration ticks many times.
	t.Run("host stops a loop of big copies", func(t *testing.T) {
		out, _ := instrument(t, bulkModule(2048), InstrumentOptions{})
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		r, calls := newRuntime(t, ctx, func(ctx context.Context, _ int) int32 {
			if ctx.Err() != nil {
				panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
			}
			return 0
		})
		mod := instantiate(t, ctx, r, out, "m")
		start := time.Now()
		_, err := mod.ExportedFunction("spin").Call(dctx, 64<<20)
		var exit *sys.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
			t.Fatalf("spin returned %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("stopped after %v and %d ticks", d, *calls)
		}
	})
}
