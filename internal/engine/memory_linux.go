//go:build linux

package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// memfdCreate makes the anonymous file a Linux image lives in.
var memfdCreate = func() (int, error) { return unix.MemfdCreate("wasmbox-snapshot", unix.MFD_CLOEXEC) }

// hasPagemap: /proc/self/pagemap tells which pages of a memory became private.
const hasPagemap = true

// The PAGEMAP_SCAN ioctl of /proc/self/pagemap (Linux 6.7+, linux/fs.h): it returns the ranges of pages in a
// given category instead of one 8-byte entry per page.
const (
	pagemapScan   = 0xC0606610 // _IOWR('f', 16, struct pm_scan_arg)
	pageIsFile    = 1 << 2
	pageIsPresent = 1 << 3
	pageIsSwapped = 1 << 4
	scanRegions   = 256 // page_region entries per call: a short run leaves about a hundred ranges, one call reads them all
)

// pmScanArg is struct pm_scan_arg.
type pmScanArg struct {
	size, flags, start, end, walkEnd, vec, vecLen, maxPages uint64
	categoryInverted, categoryMask, categoryAnyofMask       uint64
	returnMask                                              uint64
}

// pageRegion is struct page_region.
type pageRegion struct{ start, end, categories uint64 }

// pagemap is /proc/self/pagemap, opened once per process and shared: reads and the scan ioctl carry their own
// offsets, so concurrent resets need no lock.
var pagemap struct {
	once sync.Once
	f    *os.File
	err  error
	// noScan is set once the kernel refused PAGEMAP_SCAN (before 6.7, or filtered): every reset then reads the entries.
	noScan atomic.Bool
}

// regionBufs holds the scan's output buffers. They are on the heap (the kernel writes to them through an
// address the ioctl argument carries, which the Go stack could move) and reused.
var regionBufs = sync.Pool{New: func() any { return new([scanRegions]pageRegion) }}

// forceReadPagemap makes privateRanges read pagemap entries even where PAGEMAP_SCAN works (tests compare both).
var forceReadPagemap = false

// privateRanges calls visit(off, n) for every run of pages in the size bytes at base that are private to this
// mapping (present or swapped, and not the file's own pages): the pages a copy-on-write mapping has written.
// Offsets and lengths are in bytes, page-aligned.
func privateRanges(base uintptr, size uint64, visit func(off, n uint64)) error {
	pagemap.once.Do(func() { pagemap.f, pagemap.err = os.Open("/proc/self/pagemap") })
	if pagemap.err != nil {
		return pagemap.err
	}
	if !forceReadPagemap && !pagemap.noScan.Load() {
		err := scanPrivate(pagemap.f, base, size, visit)
		// Any refusal by the kernel (ENOTTY, EINVAL before 6.7; ENOSYS or EPERM from a seccomp filter or an
		// emulator) means reading the entries instead; a wrong answer from a scan is an error.
		var errno unix.Errno
		if !errors.As(err, &errno) {
			return err
		}
		pagemap.noScan.Store(true)
	}
	return readPrivate(pagemap.f, base, size, visit)
}

// scanPrivate asks the kernel for the private ranges with PAGEMAP_SCAN.
func scanPrivate(f *os.File, base uintptr, size uint64, visit func(off, n uint64)) error {
	buf := regionBufs.Get().(*[scanRegions]pageRegion)
	defer regionBufs.Put(buf)
	start, end := uint64(base), uint64(base)+size
	for start < end {
		arg := pmScanArg{
			size: uint64(unsafe.Sizeof(pmScanArg{})), start: start, end: end,
			vec: uint64(uintptr(unsafe.Pointer(&buf[0]))), vecLen: scanRegions,
			// Not a page of the file (category inverted and required), and present or swapped.
			categoryInverted: pageIsFile, categoryMask: pageIsFile,
			categoryAnyofMask: pageIsPresent | pageIsSwapped, returnMask: pageIsPresent | pageIsSwapped,
		}
		n, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), pagemapScan, uintptr(unsafe.Pointer(&arg)))
		if errno != 0 {
			return errno
		}
		if n > scanRegions {
			return fmt.Errorf("engine: PAGEMAP_SCAN returned %d regions for %d", n, scanRegions)
		}
		for _, r := range buf[:n] {
			if r.start < start || r.end > end || r.end < r.start {
				return fmt.Errorf("engine: PAGEMAP_SCAN returned [%#x, %#x) outside [%#x, %#x)", r.start, r.end, start, end)
			}
			visit(r.start-uint64(base), r.end-r.start)
		}
		if arg.walkEnd <= start { // no progress: never loop
			return fmt.Errorf("engine: PAGEMAP_SCAN stopped at %#x", arg.walkEnd)
		}
		start = arg.walkEnd
	}
	return nil
}

// readPrivate reads the 8-byte pagemap entry of every page: bit 63 present, 62 swapped, 61 a page of the file
// (or shared).
func readPrivate(f *os.File, base uintptr, size uint64, visit func(off, n uint64)) error {
	const page = 4096
	pages := int(size / page)
	entries := make([]byte, 8*min(pages, 8192))
	for first := 0; first < pages; first += len(entries) / 8 {
		n := min(pages-first, len(entries)/8)
		if _, err := f.ReadAt(entries[:8*n], int64((base/page+uintptr(first))*8)); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			e := binary.LittleEndian.Uint64(entries[8*i:])
			present, swapped, fileOrShared := e&(1<<63) != 0, e&(1<<62) != 0, e&(1<<61) != 0
			if (present || swapped) && !fileOrShared {
				visit(uint64(first+i)*page, page)
			}
		}
	}
	return nil
}
