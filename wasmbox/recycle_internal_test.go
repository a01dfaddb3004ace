package wasmbox

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/enginetest"
)

// spareCount is how many recycled instances sb keeps.
func spareCount(sb *Sandbox) int {
	sb.spares.mu.Lock()
	defer sb.spares.mu.Unlock()
	return len(sb.spares.list)
}

// instanceState is what an instance holds between calls: linear memory and the mutable globals.
func instanceState(t *testing.T, inst engine.Instance) ([]byte, [2]uint64) {
	t.Helper()
	return append([]byte(nil), inst.MemoryBytes()...), enginetest.Globals(t, inst)
}

// A recycled instance is what instantiation made: the same memory, byte for byte, and the same globals; a
// program on it sees what a program on a new instance sees.
func TestRecycledInstanceIsAsInstantiated(t *testing.T) {
	ctx := context.Background()
	sb, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)

	g, err := sb.newGuest(ctx, newWorkspace(0, 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	freshMem, freshGlobals := instanceState(t, g.inst)
	g.close(ctx) // not a Run's guest: closed, not kept
	if n := spareCount(sb); n != 0 {
		t.Fatalf("a guest that served no Run was kept (%d spares)", n)
	}
	want, err := sb.Run(ctx, enginetest.Probe) // on a new instance
	if err != nil {
		t.Fatal(err)
	}
	if n := spareCount(sb); n != 1 {
		t.Fatalf("%d spares after a Run, want 1", n)
	}

	for round := range 3 {
		res, err := sb.Run(ctx, enginetest.LeaveEverything)
		if err != nil || res.Stdout != "left\n" {
			t.Fatalf("round %d: %v %q %s", round, err, res.Stdout, res.Stderr)
		}
		sb.spares.mu.Lock()
		if len(sb.spares.list) != 1 {
			sb.spares.mu.Unlock()
			t.Fatalf("round %d: %d spares", round, len(sb.spares.list))
		}
		inst := sb.spares.list[0].inst
		sb.spares.mu.Unlock()
		mem, globals := instanceState(t, inst)
		if globals != freshGlobals {
			t.Errorf("round %d: globals %v, instantiated with %v", round, globals, freshGlobals)
		}
		if !bytes.Equal(mem, freshMem) {
			diff := 0
			for k := range min(len(mem), len(freshMem)) {
				if mem[k] != freshMem[k] {
					diff++
				}
			}
			t.Errorf("round %d: memory differs from a new instance's (%d vs %d bytes, %d differ)", round, len(mem), len(freshMem), diff)
		}
		got, err := sb.Run(ctx, enginetest.Probe) // on the recycled instance
		if err != nil {
			t.Fatal(err)
		}
		if got.Stdout != want.Stdout || got.Stderr != want.Stderr {
			t.Errorf("round %d: on a recycled instance the probe saw\n%s%s\non a new one\n%s%s", round, got.Stdout, got.Stderr, want.Stdout, want.Stderr)
		}
	}
}

// Runs that end in a way the host cannot vouch for leave no spare: their instance is closed, and the next Run
// still works.
func TestRecycleRefused(t *testing.T) {
	ctx := context.Background()
	sb, err := New(ctx, Config{Timeout: 2 * time.Second, MemoryLimit: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	cases := []struct{ name, code string }{
		{"memory grew", "b = bytearray(64 << 20)\nprint(len(b))"},
		{"os._exit", "import os\nos._exit(3)"},
		{"hard kill at the deadline", "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"},
		{"trap", "import sys\nsys.setrecursionlimit(10**6)\ndef f(n): return f(n + 1)\nf(0)"},
	}
	for _, tc := range cases {
		sb.closeSpares(ctx) // start each case with none
		sb.spares.mu.Lock()
		sb.spares.closed = false
		sb.spares.mu.Unlock()
		_, _ = sb.Run(ctx, tc.code)
		if n := spareCount(sb); n != 0 {
			t.Errorf("%s: %d spares kept", tc.name, n)
		}
		res, err := sb.Run(ctx, "print(40 + 2)")
		if err != nil || res.Stdout != "42\n" {
			t.Errorf("%s: next run: %v %q", tc.name, err, res.Stdout)
		}
		if n := spareCount(sb); n != 1 {
			t.Errorf("%s: %d spares after a clean run, want 1", tc.name, n)
		}
	}
}

// Close closes the spares, and a Run that ends after Close keeps nothing.
func TestSparesClosedWithSandbox(t *testing.T) {
	ctx := context.Background()
	sb, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Run(ctx, "pass"); err != nil {
		t.Fatal(err)
	}
	sb.spares.mu.Lock()
	inst := sb.spares.list[0].inst
	sb.spares.mu.Unlock()
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := spareCount(sb); n != 0 {
		t.Errorf("%d spares after Close", n)
	}
	if _, err := inst.Call(ctx, hostfuncs.ExportABIVersion); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a spare still answers after Close: %v", err)
	}
}
