package wasmtime

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/enginetest"
)

// recyclable is the wasmtime interpreter, its snapshot module and an allocator of its image: what recyclable
// instances are made of. Where images are copied rather than mapped, there are none, and the test is skipped.
func recyclable(t *testing.T) (*testInterp, engine.Module, engine.MemoryAllocator) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("images are copied, not mapped, on " + runtime.GOOS + ": its instances are not recycled")
	}
	it := loadInterp(t, "wasmtime")
	_, mod, image := snapshotOf(t, it)
	return it, mod, image.Allocator(256 << 20)
}

// A wasmtime instance started from a mapped snapshot image can serve another run: Recycle puts its memory back to
// the image, byte for byte, and its globals to their initial values; Reuse gives it a new run's world, in which a
// program sees what it sees on a new instance.
func TestWasmtimeRecycle(t *testing.T) {
	it, mod, alloc := recyclable(t)

	want := newGuest(t, it, guestOpts{mod: mod, memory: alloc}).mustExec(enginetest.Probe) // on a new instance
	g := newGuest(t, it, guestOpts{mod: mod, memory: alloc})
	mem0 := append([]byte(nil), g.inst.MemoryBytes()...)
	glob0 := enginetest.Globals(t, g.inst)
	r, ok := g.inst.(engine.Recycler)
	if !ok {
		t.Fatal("a wasmtime instance is not an engine.Recycler")
	}
	for round := range 3 {
		if out := g.mustExec(enginetest.LeaveEverything); out != "left\n" {
			t.Fatalf("round %d: %q", round, out)
		}
		if bytes.Equal(g.inst.MemoryBytes(), mem0) {
			t.Fatal("the run changed no byte of memory: the comparison below proves nothing")
		}
		if err := r.Recycle(); err != nil {
			t.Fatalf("round %d: recycle: %v", round, err)
		}
		if mem := g.inst.MemoryBytes(); !bytes.Equal(mem, mem0) {
			diff := 0
			for k := range min(len(mem), len(mem0)) {
				if mem[k] != mem0[k] {
					diff++
				}
			}
			t.Fatalf("round %d: memory after recycling differs from the instance's first (%d bytes of %d, lengths %d and %d)", round, diff, len(mem0), len(mem), len(mem0))
		}
		if glob := enginetest.Globals(t, g.inst); glob != glob0 {
			t.Fatalf("round %d: globals %v after recycling, want %v", round, glob, glob0)
		}
		if err := r.Recycle(); err == nil {
			t.Fatal("an instance was recycled twice")
		}
		next, cfg := newGuestState(t, it, guestOpts{mod: mod, memory: alloc})
		if err := r.Reuse(cfg); err != nil {
			t.Fatalf("round %d: reuse: %v", round, err)
		}
		next.inst = g.inst
		if got := next.mustExec(enginetest.Probe); got != want {
			t.Fatalf("round %d: on a recycled instance the probe saw\n%s\non a new one\n%s", round, got, want)
		}
		g = next
	}
	if err := r.Reuse(engine.InstanceConfig{}); err == nil {
		t.Fatal("an instance in use was given another run")
	}
}

// Recycling is refused, and the instance must then be closed, whenever it cannot be proven complete.
func TestWasmtimeRecycleRefused(t *testing.T) {
	it, mod, alloc := recyclable(t)
	for _, c := range []struct{ name, code, want string }{
		{"memory grew", "x = bytearray(64 << 20)\nx[-1] = 1", "memory grew"},
		{"the guest exited", "import os\nos._exit(3)", "did not return normally"},
		{"a trap", "import os\nos.abort()", "did not return normally"}, // abort is wasm's unreachable
	} {
		g := newGuest(t, it, guestOpts{mod: mod, memory: alloc})
		_, _ = g.exec(context.Background(), c.code)
		err := g.inst.(engine.Recycler).Recycle()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: recycle: %v, want an error saying %q", c.name, err, c.want)
		}
		if err := g.inst.(engine.Recycler).Reuse(engine.InstanceConfig{}); err == nil {
			t.Errorf("%s: an instance that was not recycled was given another run", c.name)
		}
	}
	// A killed run: the tick import asks for a kill once the context has ended.
	g := newGuest(t, it, guestOpts{mod: mod, memory: alloc})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.exec(ctx, "while True: pass"); err == nil {
		t.Fatal("a run under an ended context was not killed")
	}
	if err := g.inst.(engine.Recycler).Recycle(); err == nil || !strings.Contains(err.Error(), "did not return normally") {
		t.Errorf("killed: recycle: %v", err)
	}
	// An instance whose memory is not mapped from an image (the interpreter booting) has nothing to go back to.
	plain := newGuest(t, it, guestOpts{memory: engine.LimitedAllocator(256 << 20)})
	if err := plain.inst.(engine.Recycler).Recycle(); err == nil {
		t.Error("an instance without an image was recycled")
	}
}
