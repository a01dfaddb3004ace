package engine

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func image(t *testing.T, size int) ([]byte, Image) {
	t.Helper()
	mem := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range mem {
		mem[i] = byte(r.Uint32())
	}
	img, err := NewImage(mem)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { img.Close() })
	return mem, img
}

// A memory freed after a run that wrote pages and grew is reset to the image byte for byte before it is reused.
func TestImageMemoryResetByteForByte(t *testing.T) {
	const size, limit = 64 * 65536, 256 * 65536
	want, img := image(t, size)
	alloc := img.Allocator(limit)
	for round := range 5 {
		m := alloc.Allocate(limit)
		buf := m.Reallocate(20 * 65536) // the module declares less than the image: the image's size wins
		if len(buf) != size || !bytes.Equal(buf, want) {
			t.Fatalf("round %d: memory differs from the image (len %d)", round, len(buf))
		}
		for off := round * 4096; off < size; off += 3 * 4096 {
			buf[off] ^= 0xFF // dirty some pages, differently each round
		}
		grown := m.Reallocate(size + 50*65536)
		if len(grown) != size+50*65536 || grown[size+10] != 0 {
			t.Fatalf("round %d: growth is not zeroed memory", round)
		}
		grown[size+10] = 1
		if m.Peak() != size+50*65536 {
			t.Errorf("peak %d", m.Peak())
		}
		if m.Reallocate(limit+65536) != nil {
			t.Fatal("grew past the limit")
		}
		m.Free()
		m.Free() // idempotent: the runtime and the engine may both free
	}
}

func TestCopyImage(t *testing.T) {
	want := []byte("snapshot contents")
	img := newCopyImage(want)
	m := img.Allocator(1 << 20).Allocate(1 << 20)
	buf := m.Reallocate(4)
	if !bytes.Equal(buf, want) {
		t.Fatalf("got %q", buf)
	}
	buf[0] = 'S'
	if m2 := img.Allocator(1 << 20).Allocate(1 << 20); m2.Reallocate(0)[0] != 's' {
		t.Fatal("copies share memory")
	}
}

func TestLimitedAllocator(t *testing.T) {
	m := LimitedAllocator(4 * 65536).Allocate(1 << 32)
	if b := m.Reallocate(2 * 65536); len(b) != 2*65536 {
		t.Fatalf("len %d", len(b))
	}
	if m.Reallocate(5*65536) != nil {
		t.Fatal("grew past the limit")
	}
	m.Free()
}
