//go:build linux || darwin

package engine

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// imageModes runs f with each kind of image this system has: on Linux the memfd with the pagemap reset, and the
// unlinked temporary file with the remapping reset that macOS uses; on macOS the latter only.
func imageModes(t *testing.T, f func(t *testing.T)) {
	modes := []bool{true}
	if hasPagemap {
		modes = []bool{false, true}
	}
	for _, force := range modes {
		name := "memfd"
		if force || !hasPagemap {
			name = "tempfile"
		}
		t.Run(name, func(t *testing.T) {
			old := forceFileImage
			forceFileImage = force
			defer func() { forceFileImage = old }()
			f(t)
		})
	}
}

// Image memories are mappings (not the copying fallback), start equal to the image, do not see each other's
// writes, reset byte for byte when pooled, and the image is reset the way this mode resets.
func TestImageModes(t *testing.T) {
	imageModes(t, func(t *testing.T) {
		const size, limit = 16 * 65536, 64 * 65536
		want, img := image(t, size)
		c, ok := img.(*cowImage)
		if !ok {
			t.Fatalf("image is a %T, not a mapped file", img)
		}
		if c.remapReset != (forceFileImage || !hasPagemap) {
			t.Fatalf("remapReset %v", c.remapReset)
		}
		alloc := img.Allocator(limit)
		a, b := alloc.Allocate(limit), alloc.Allocate(limit)
		if _, ok := a.(*mmapMemory); !ok {
			t.Fatalf("memory is a %T, not mapped", a)
		}
		ab, bb := a.Reallocate(0), b.Reallocate(0)
		ab[100] ^= 0xFF
		if bb[100] != want[100] || !bytes.Equal(bb, want) {
			t.Fatal("a write to one memory shows in another: not private")
		}
		if c.src[100] != want[100] {
			t.Fatal("a write to a memory reached the image")
		}
		b.Free()
		for round := range 3 {
			ab = a.Reallocate(size + 65536)
			for off := round * 4096; off < size+65536; off += 5 * 4096 {
				ab[off] ^= 0x5A
			}
			a.Free()
			a = alloc.Allocate(limit) // from the pool
			if got := a.Reallocate(0); len(got) != size || !bytes.Equal(got, want) {
				t.Fatalf("round %d: a pooled memory differs from the image", round)
			}
			if g := a.Reallocate(size + 65536); g[size+5*4096] != 0 {
				t.Fatalf("round %d: regrown memory not zero", round)
			}
		}
		a.Free()
	})
}

// The reset-by-byte test of memory_test.go, in every mode.
func TestImageModesReset(t *testing.T) {
	imageModes(t, TestImageMemoryResetByteForByte)
}

// A memory may be freed while its image closes (a run abandoned on a hung host call is closed after its Sandbox):
// the reset never reads the image's mapping after Close unmapped it. Run under -race, this fails if put reads
// c.src or c.fd outside the lock that Close takes.
func TestImageCloseDuringReset(t *testing.T) {
	imageModes(t, func(t *testing.T) {
		const size, limit = 16 * 65536, 64 * 65536
		for range 20 {
			mem := make([]byte, size)
			img, err := NewImage(mem)
			if err != nil {
				t.Fatal(err)
			}
			alloc := img.Allocator(limit)
			ms := make([]LinearMemory, 4)
			for i := range ms {
				ms[i] = alloc.Allocate(limit)
				buf := ms[i].Reallocate(size + 65536)
				for off := 0; off < len(buf); off += 4096 {
					buf[off] = 1 // private pages for the reset to copy back
				}
			}
			done := make(chan struct{})
			for _, m := range ms {
				go func() { m.Free(); done <- struct{}{} }()
			}
			if err := img.Close(); err != nil {
				t.Fatal(err)
			}
			for range ms {
				<-done
			}
			c := img.(*cowImage)
			c.mu.Lock()
			pooled := c.pool
			c.mu.Unlock()
			if pooled != nil {
				t.Fatal("a closed image kept pooled memories")
			}
		}
	})
}

// An engine that allocates memory itself (wasmtime) gets the image mapped over it (ImageMapper): what the memory
// held there is replaced, a new mapping holds no private page, and ResetMapped puts back both a few written
// pages (copied back, on Linux) and most of them (mapped again); bad memories and a closed image are refused.
func TestImageMapper(t *testing.T) {
	imageModes(t, func(t *testing.T) {
		const size = 1 << 20
		src := make([]byte, size)
		for k := 0; k < size; k += 4096 * 3 {
			src[k], src[k+100] = byte(k>>12), 0xab
		}
		img, err := NewImage(src)
		if err != nil {
			t.Fatal(err)
		}
		defer img.Close()
		m, ok := img.Allocator(4 << 20).(ImageMapper)
		if !ok {
			t.Fatal("the allocator of a mapped image is not an ImageMapper")
		}
		if m.ImageSize() != size || m.Limit() != 4<<20 {
			t.Fatalf("ImageSize %d, Limit %d", m.ImageSize(), m.Limit())
		}
		// A memory of the engine's own, larger than the image, full of something else.
		mem, err := unix.Mmap(-1, 0, 2*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(mem)
		for k := range mem {
			mem[k] = 0x5a
		}
		if err := m.MapImage(mem); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mem[:size], src) || mem[size] != 0x5a {
			t.Fatal("after MapImage the memory is not the image followed by what it held")
		}
		if hasPagemap {
			if n, err := PrivateBytes(mem[:size]); err != nil || n != 0 {
				t.Fatalf("a new mapping holds %d private bytes (%v)", n, err)
			}
		}
		for _, written := range []int{3, size / 4096} { // a few pages, then every page
			for p := range written {
				mem[p*4096+7] ^= 0xff
			}
			if err := m.ResetMapped(mem); err != nil {
				t.Fatalf("%d pages written: %v", written, err)
			}
			if !bytes.Equal(mem[:size], src) {
				t.Fatalf("%d pages written: the reset memory is not the image", written)
			}
		}
		for name, bad := range map[string][]byte{"too short": mem[:size-4096], "not on a page": mem[1:]} {
			if err := m.MapImage(bad); err == nil {
				t.Errorf("MapImage accepted a memory %s", name)
			}
			if err := m.ResetMapped(bad); err == nil {
				t.Errorf("ResetMapped accepted a memory %s", name)
			}
		}
		if err := img.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.MapImage(mem); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("MapImage after Close: %v", err)
		}
		if err := m.ResetMapped(mem); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("ResetMapped after Close: %v", err)
		}
	})
}
