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
