//go:build linux

package engine

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Huge pages for wazero's compiled code.
//
// On a cache hit wazero v1.12 maps an anonymous, private, read-write region for the module's machine code (45 MB
// for CPython), reads the cache file into it, checksums it and makes it executable. Every 4 KiB page of that
// region is fresh memory: a page fault on the read and, on a virtual machine, a TLB miss on the checksum. With the
// system's transparent huge pages set to "madvise" (a common setting) the region gets none, because wazero does
// not ask. The region is made inside wazero (internal/platform), and its cache is closed to other
// implementations, so nothing public reaches it; but wazero maps it with golang.org/x/sys/unix's Mmap, which
// calls a function held in that package's mapper. While a Compile runs, that function is wrapped: an anonymous,
// private, read-write mapping of at least a huge page (2 MiB) at no fixed address (exactly the form of wazero's
// code region) is aligned to a huge page and advised MADV_HUGEPAGE. Every other mapping, and every mapping
// outside a Compile, goes through unchanged. The result is still an anonymous private mapping of the requested
// length, so wazero's later mprotect and munmap, and any other caller's use of it, behave as before.
//
// The wrapper is installed only if x/sys/unix's mapper has the layout mirrored below, which init checks against
// a live mapping before it writes anything, and used only with transparent huge pages "madvise" or "always";
// otherwise code pages stay as wazero makes them.

// xsysMmapper mirrors golang.org/x/sys/unix's mmapper (as of x/sys v0.49.0; checked at init).
type xsysMmapper struct {
	sync.Mutex
	active map[*byte][]byte
	mmap   func(addr, length uintptr, prot, flags, fd int, offset int64) (uintptr, error)
	munmap func(addr uintptr, length uintptr) error
}

//go:linkname xsysMapper golang.org/x/sys/unix.mapper
var xsysMapper *xsysMmapper

var (
	// hugePageSize is the size of a transparent huge page (hpage_pmd_size: 2 MiB on x86-64 and on arm64 with
	// 4 KiB pages).
	hugePageSize uintptr
	// hugeCodeCompiles counts the Compiles under way that want their code in huge pages.
	hugeCodeCompiles atomic.Int32
	// hugeCodeAdvised counts the mappings the wrapper aligned and advised (tests read it).
	hugeCodeAdvised atomic.Int64
	// origMmap is x/sys/unix's own mmap, which the wrapper calls; nil when the wrapper is not installed.
	origMmap func(addr, length uintptr, prot, flags, fd int, offset int64) (uintptr, error)
	// hugeCodeInstalled says why init did not install the wrapper ("" when it did).
	hugeCodeInstalled string

	hugeCodeOnce sync.Once
	hugeCodeWhy  string
)

// init installs the wrapper (a probe mapping and a pointer swap: a few microseconds). It runs before any
// goroutine of this package can map anything, so the swap races with no unix.Mmap of ours. The system's huge-page
// settings are read only when the first Compile asks (hugeCodeOff).
func init() { hugeCodeInstalled = installHugeCode() }

func installHugeCode() string {
	if why := checkMapperLayout(); why != "" {
		return why
	}
	origMmap = xsysMapper.mmap
	xsysMapper.mmap = hugeCodeMmap
	return ""
}

// hugeCodeOff says why a Compile's code is not put in huge pages ("" when it is): the wrapper is not installed,
// or the system has no transparent huge pages for it. It reads the settings once.
func hugeCodeOff() string {
	hugeCodeOnce.Do(func() {
		if hugeCodeWhy = hugeCodeInstalled; hugeCodeWhy == "" {
			hugeCodeWhy = readHugePageSize()
		}
	})
	return hugeCodeWhy
}

// readHugePageSize sets hugePageSize from the system's settings, or says why huge pages are not used.
func readHugePageSize() string {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return "no transparent huge pages: " + err.Error()
	}
	if !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		return "transparent huge pages are " + strings.TrimSpace(string(mode))
	}
	pmd, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
	if err != nil {
		return "no huge page size: " + err.Error()
	}
	size, err := strconv.ParseUint(strings.TrimSpace(string(pmd)), 10, 64)
	// A huge page larger than 32 MiB (arm64 with 64 KiB pages: 512 MiB) would rarely fit in a module's code.
	if err != nil || size < uint64(os.Getpagesize()) || size&(size-1) != 0 || size > 32<<20 {
		return "huge pages of " + strings.TrimSpace(string(pmd)) + " bytes are not used for code"
	}
	hugePageSize = uintptr(size) // before any Compile counts itself in hugeCodeCompiles, which orders it
	return ""
}

// checkMapperLayout reports whether xsysMapper looks like x/sys/unix's mapper: a live mapping made with
// unix.Mmap must appear in its active map under its last byte, and both functions must be set.
func checkMapperLayout() string {
	m := xsysMapper
	if m == nil || m.active == nil || m.mmap == nil || m.munmap == nil { // nil checks read the words, no more
		return "x/sys/unix's mapper has another layout"
	}
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return "probe mapping: " + err.Error()
	}
	defer unix.Munmap(b)
	m.Lock()
	got, ok := m.active[&b[len(b)-1]]
	m.Unlock()
	if !ok || len(got) != len(b) || unsafe.SliceData(got) != unsafe.SliceData(b) {
		return "x/sys/unix's mapper has another layout"
	}
	return ""
}

// hugeCodeMmap is the wrapper of x/sys/unix's mmap.
func hugeCodeMmap(addr, length uintptr, prot, flags, fd int, offset int64) (uintptr, error) {
	if hugeCodeCompiles.Load() == 0 || addr != 0 || fd != -1 || offset != 0 || length < hugePageSize ||
		prot != unix.PROT_READ|unix.PROT_WRITE || flags != unix.MAP_ANON|unix.MAP_PRIVATE {
		return origMmap(addr, length, prot, flags, fd, offset)
	}
	raw, err := origMmap(0, length+hugePageSize, prot, flags, fd, 0)
	if err != nil { // no room for the slack: as asked
		return origMmap(addr, length, prot, flags, fd, offset)
	}
	start := (raw + hugePageSize - 1) &^ (hugePageSize - 1)
	if start > raw {
		_ = xsysMapper.munmap(raw, start-raw)
	}
	if end, want := raw+length+hugePageSize, start+length; end > want {
		_ = xsysMapper.munmap(want, end-want)
	}
	// Advice only: where it fails (a kernel without THP for this mapping) the pages are small, as before.
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, start, length, unix.MADV_HUGEPAGE); e == 0 {
		hugeCodeAdvised.Add(1)
	}
	return start, nil
}

// withHugeCode runs fn (a CompileModule) with the wrapper active.
func withHugeCode(fn func()) {
	if hugeCodeOff() != "" {
		fn()
		return
	}
	hugeCodeCompiles.Add(1)
	defer hugeCodeCompiles.Add(-1)
	fn()
}
