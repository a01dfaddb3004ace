//go:build linux

package engine

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readSink keeps the test's reads from being optimised away.
var readSink byte

// privatePages lists, in pages, what privateRanges reports for m's image part.
func privatePages(t *testing.T, m *mmapMemory, size uint64) []uint64 {
	t.Helper()
	var pages []uint64
	err := privateRanges(uintptr(unsafe.Pointer(&m.region[0])), size, func(off, n uint64) {
		if off%4096 != 0 || n%4096 != 0 || n == 0 {
			t.Errorf("range [%d, +%d) is not whole pages", off, n)
		}
		for p := off / 4096; p < (off+n)/4096; p++ {
			pages = append(pages, p)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// The kernel's PAGEMAP_SCAN and the pagemap entries name exactly the pages a copy-on-write memory wrote: runs,
// single pages, the first and the last page, and none of the pages it only read.
func TestPrivateRangesScanAndRead(t *testing.T) {
	const size = 300 * 4096
	_, img := image(t, size)
	m := img.Allocator(2 * size).Allocate(2 * size).(*mmapMemory)
	defer m.Free()
	buf := m.Reallocate(0)
	written := []uint64{0, 1, 2, 3, 10, 64, 65, 130, 200, 201, 202, 299}
	for _, p := range written {
		buf[p*4096+17] ^= 0xA5
	}
	for p := 100; p < 120; p++ { // read only: stays shared with the image
		readSink += buf[p*4096]
	}
	forceReadPagemap = true
	read := privatePages(t, m, size)
	forceReadPagemap = false
	if !slices.Equal(read, written) {
		t.Fatalf("pagemap entries: private pages %v, want %v", read, written)
	}
	scanned := privatePages(t, m, size)
	if pagemap.noScan.Load() {
		if kernelAtLeast(t, 6, 7) {
			t.Fatal("the kernel has PAGEMAP_SCAN (6.7+) but refused our request")
		}
		t.Skip("this kernel has no PAGEMAP_SCAN (Linux 6.7+): only the entry reading was checked")
	}
	if !slices.Equal(scanned, written) {
		t.Fatalf("PAGEMAP_SCAN: private pages %v, want %v", scanned, written)
	}
}

// The byte-for-byte reset test with the pagemap entries read one by one (kernels before PAGEMAP_SCAN).
func TestImageResetReadingPagemap(t *testing.T) {
	forceReadPagemap = true
	defer func() { forceReadPagemap = false }()
	TestImageMemoryResetByteForByte(t)
}

// kernelAtLeast reports whether the running kernel's release is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", u.Release[:], err)
	}
	return ma > major || ma == major && mi >= minor
}

// A reset copies a few written pages back, so they stay private (and the next run takes no fault on them), but
// maps the image again once more than 1/remapFraction of it is private, so the pages a large run wrote are not
// copied again at every later reset. Either way the memory equals the image afterwards.
func TestResetCopiesFewRemapsMany(t *testing.T) {
	const pages = 400
	const size = pages * 4096
	want, img := image(t, size)
	c := img.(*cowImage)
	if c.remapReset {
		t.Skip("this image resets by remapping only")
	}
	m := img.Allocator(size).Allocate(size).(*mmapMemory)
	defer m.Free()
	for _, tc := range []struct {
		written     int
		keptPrivate bool
	}{{pages / remapFraction, true}, {pages/remapFraction + 1, false}, {3, true}} {
		buf := m.Reallocate(0)
		for p := range tc.written {
			buf[p*4096+9] ^= 0x3C
		}
		if err := c.reset(m); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.Reallocate(0), want) {
			t.Fatalf("%d pages written: the memory differs from the image after the reset", tc.written)
		}
		got := privatePages(t, m, size)
		switch {
		case tc.keptPrivate && len(got) < tc.written:
			t.Errorf("%d pages written: %d private after the reset, want them copied back and kept", tc.written, len(got))
		case !tc.keptPrivate && len(got) != 0:
			t.Errorf("%d pages written: %d still private after the reset, want the image mapped again", tc.written, len(got))
		}
	}
}
