// Package enginetest holds what the tests of every engine share: a hand-made guest that calls the wasmbox_v1
// imports with arguments of its own choosing, and the checks of how the engine bounds them.
package enginetest

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
)

// ABIModule is a hand-encoded module with one page of memory ("memory") that re-exports the wasmbox_v1 imports
// call_into and fetch as "into" and "fetch": a guest that calls them with any arguments it likes.
func ABIModule() []byte {
	leb := func(v uint32) []byte {
		var b []byte
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v != 0 {
				b = append(b, c|0x80)
				continue
			}
			return append(b, c)
		}
	}
	str := func(s string) []byte { return append(leb(uint32(len(s))), s...) }
	sec := func(id byte, items ...[]byte) []byte {
		body := leb(uint32(len(items)))
		for _, it := range items {
			body = append(body, it...)
		}
		return append(append([]byte{id}, leb(uint32(len(body)))...), body...)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	const i32 = 0x7f
	types := sec(1,
		[]byte{0x60, 4, i32, i32, i32, i32, 1, i32}, // 0: call_into
		[]byte{0x60, 2, i32, i32, 1, i32})           // 1: fetch
	imports := sec(2,
		cat(str(hostfuncs.ImportModule), str(hostfuncs.ImportCallInto), []byte{0x00, 0}),
		cat(str(hostfuncs.ImportModule), str(hostfuncs.ImportFetch), []byte{0x00, 1}))
	funcs := sec(3, []byte{0}, []byte{1})
	memory := sec(5, []byte{0x00, 1}) // one page, no maximum
	exports := sec(7,
		cat(str("memory"), []byte{0x02, 0}),
		cat(str("into"), []byte{0x00, 2}),
		cat(str("fetch"), []byte{0x00, 3}))
	// into(a, b, c, d) = call_into(a, b, c, d); fetch(a, b) = fetch(a, b)
	into := []byte{0x00, 0x20, 0, 0x20, 1, 0x20, 2, 0x20, 3, 0x10, 0, 0x0b}
	fetch := []byte{0x00, 0x20, 0, 0x20, 1, 0x10, 1, 0x0b}
	code := sec(10, append(leb(uint32(len(into))), into...), append(leb(uint32(len(fetch))), fetch...))
	return cat([]byte("\x00asm\x01\x00\x00\x00"), types, imports, funcs, memory, exports, code)
}

// EchoHost answers every request with its own bytes, and counts them in Calls.
type EchoHost struct{ Calls int }

func (h *EchoHost) Call(_ context.Context, req []byte) ([]byte, bool) {
	h.Calls++
	return append([]byte(nil), req...), false
}

func (h *EchoHost) Tick(context.Context) (int32, bool) { return hostfuncs.TickInterval, false }

// CheckCallIntoOn compiles ABIModule with eng and runs CheckCallInto on an instance of it.
func CheckCallIntoOn(t *testing.T, eng engine.Engine) {
	t.Helper()
	ctx := context.Background()
	mod, err := eng.Compile(ctx, ABIModule())
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	host := &EchoHost{}
	inst, err := mod.Instantiate(ctx, engine.InstanceConfig{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close(ctx)
	CheckCallInto(t, inst, host)
}

// CheckCallInto drives inst, an instance of ABIModule served by host, through call_into with the guest's own
// choice of buffer: a response that fits is written there and nothing is left to fetch; one that does not is
// kept for fetch; a buffer outside memory (or of negative length) is refused before the host handles the request,
// whatever the pointer arithmetic would wrap to.
func CheckCallInto(t *testing.T, inst engine.Instance, host *EchoHost) {
	t.Helper()
	ctx := context.Background()
	const page = 65536
	req := []byte("Techo\n{\"x\":1}")
	if !inst.Write(0, req) {
		t.Fatal("write request")
	}
	call := func(name string, params ...uint64) int32 {
		t.Helper()
		r, err := inst.Call(ctx, name, params...)
		if err != nil {
			t.Fatalf("%s%v: %v", name, params, err)
		}
		return int32(r[0])
	}
	u := func(v int32) uint64 { return uint64(uint32(v)) }
	n := int32(len(req))

	// Fits: written at the buffer, nothing pending.
	if got := call("into", 0, u(n), 1000, 64); got != n {
		t.Fatalf("into = %d, want %d", got, n)
	}
	if b, _ := inst.Read(1000, uint32(n)); !bytes.Equal(b, req) {
		t.Fatalf("buffer holds %q", b)
	}
	if got := call("fetch", 2000, 64); got != -1 {
		t.Fatalf("fetch after a delivered response = %d, want -1", got)
	}
	// Too small: kept for fetch, the buffer untouched.
	if !inst.Write(3000, []byte("untouched")) {
		t.Fatal("write")
	}
	if got := call("into", 0, u(n), 3000, 4); got != n {
		t.Fatalf("into = %d, want %d", got, n)
	}
	if b, _ := inst.Read(3000, 9); string(b) != "untouched" {
		t.Fatalf("a buffer too small was written: %q", b)
	}
	if got := call("fetch", 4000, u(n)); got != n {
		t.Fatalf("fetch = %d, want %d", got, n)
	}
	// Buffers outside memory: the host is not called.
	calls := host.Calls
	for _, bad := range [][2]int32{{page - 3, 4}, {page, 1}, {-1, 2}, {0, -1}, {0, page + 1}, {math.MaxInt32, math.MaxInt32}} {
		if got := call("into", 0, u(n), u(bad[0]), u(bad[1])); got != hostfuncs.CallIntoBadBuffer {
			t.Errorf("into with buffer [%d, +%d) = %d, want %d", uint32(bad[0]), bad[1], got, int32(hostfuncs.CallIntoBadBuffer))
		}
	}
	if host.Calls != calls {
		t.Fatalf("the host handled %d requests with a bad buffer", host.Calls-calls)
	}
	// The whole memory as the buffer is fine; a request outside memory is an ABIError response, delivered.
	if got := call("into", u(page-2), 16, 0, page); got >= 0 {
		t.Fatalf("into with a request outside memory = %d, want an error response", got)
	}
	if b, _ := inst.Read(0, 64); !bytes.Contains(b, []byte("ABIError")) {
		t.Fatalf("buffer holds %q, want the ABIError response", b)
	}
}
