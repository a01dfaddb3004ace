//go:build linux || darwin

package engine

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Copy-on-write snapshot memory on Linux and macOS. An image lives in a file: a memfd on Linux, an unlinked
// temporary file elsewhere (and on Linux when forceFileImage is set, which is how the tests run the macOS path
// here). Each instance maps the file MAP_PRIVATE over the start of its reservation, so instances share the
// image's pages until they write them. A freed memory is reset and pooled: on Linux only the pages that became
// private are copied back from the image (/proc/self/pagemap says which); elsewhere the image is mapped again
// over the same addresses, which drops every private page at once.

// forceFileImage makes newImage use the temporary-file image and the remapping reset on Linux too.
var forceFileImage = false

// mmapMemory reserves the whole limit of address space with PROT_NONE and makes pages accessible as the memory
// grows, so the buffer never moves and untouched pages cost nothing. With an image, the image file is mapped
// MAP_PRIVATE over the start of the reservation: instances share its pages until they write them (copy-on-write).
type mmapMemory struct {
	region []byte
	size   uint64 // accessible bytes
	peak   uint64
	// release, if set, may take the memory back for reuse (a pooled image memory).
	release func(*mmapMemory) bool
	freed   bool // Free is idempotent: the engine and its runtime may both call it
	// image is where the memory started from (nil for a plain memory): ResetToImage goes back to it.
	image *cowImage
}

func newLinearMemory(max uint64) LinearMemory {
	m, err := reserve(max)
	if err != nil {
		return &sliceMemory{max: max}
	}
	return m
}

func reserve(max uint64) (*mmapMemory, error) {
	if max == 0 {
		return nil, fmt.Errorf("engine: empty memory reservation")
	}
	region, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	return &mmapMemory{region: region}, nil
}

func (m *mmapMemory) Reallocate(size uint64) []byte {
	if m.region == nil || size > uint64(len(m.region)) {
		return nil
	}
	if size > m.size {
		if err := unix.Mprotect(m.region[m.size:size], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return nil
		}
		m.size = size
	}
	m.peak = max(m.peak, m.size)
	// A memory started from an image is at least the image's size, even when the module declares less: the
	// engine takes the memory's size from the buffer's length.
	return m.region[:m.size:m.size]
}

func (m *mmapMemory) Free() {
	if m.region == nil || m.freed {
		return
	}
	m.freed = true
	if m.release != nil && m.release(m) {
		return
	}
	m.unmap()
}

func (m *mmapMemory) unmap() {
	if m.region != nil {
		_ = unix.Munmap(m.region)
		m.region = nil
	}
}

func (m *mmapMemory) Peak() uint64 { return m.peak }

// ResetToImage implements ImageMemory: the pages that became private are copied back from the image (or the
// image is mapped again over the memory), as when a freed memory is pooled, but the memory stays with its
// instance.
func (m *mmapMemory) ResetToImage() error {
	if m.image == nil || m.region == nil || m.freed {
		return errors.New("engine: memory has no image to go back to")
	}
	return m.image.resetInPlace(m)
}

// cowImage is a memory image in a file (memfd or unlinked temporary file). Memories freed by their instance go back to a pool after their
// private pages are restored from the image, so the next instance starts with no page faults to take.
type cowImage struct {
	fd   int
	size uint64
	src  []byte // the image file mapped shared and read-only: where resets copy pages from

	// inUse is held shared by every reset (put) and exclusively by Close, so Close never unmaps src or closes
	// fd under a reset: an instance may free its memory after the image was closed (a run abandoned on a hung
	// host call is closed when that call returns, which may be after its Sandbox closed). Taken before mu.
	inUse  sync.RWMutex
	mu     sync.Mutex
	closed bool
	pool   map[uint64][]*mmapMemory // by reservation size
	// remapReset resets a freed memory by mapping the image again over it: where there is no
	// /proc/self/pagemap (macOS), and on Linux when forceFileImage is set.
	remapReset bool
}

// maxPooled bounds the idle memories kept per reservation size.
var maxPooled = 2 * runtime.GOMAXPROCS(0)

func newImage(mem []byte) (Image, error) {
	fd, err := imageFile()
	if err != nil {
		return newCopyImage(mem), nil
	}
	if err := unix.Ftruncate(fd, int64(len(mem))); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("engine: snapshot image: %w", err)
	}
	for off := 0; off < len(mem); {
		n, err := unix.Pwrite(fd, mem[off:], int64(off))
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("engine: snapshot image: %w", err)
		}
		off += n
	}
	c := &cowImage{fd: fd, size: uint64(len(mem)), pool: map[uint64][]*mmapMemory{}, remapReset: !hasPagemap || forceFileImage}
	if len(mem) > 0 {
		if c.src, err = unix.Mmap(fd, 0, len(mem), unix.PROT_READ, unix.MAP_SHARED); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("engine: snapshot image: %w", err)
		}
	}
	return c, nil
}

// imageFile returns a new empty file for an image: a memfd where there is one, else a temporary file unlinked
// at once, so nothing is left behind whatever happens to the process.
func imageFile() (int, error) {
	if memfdCreate != nil && !forceFileImage {
		if fd, err := memfdCreate(); err == nil {
			return fd, nil
		}
	}
	f, err := os.CreateTemp("", "wasmbox-snapshot-*")
	if err != nil {
		return -1, err
	}
	defer f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return -1, err
	}
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return -1, err
	}
	unix.CloseOnExec(fd)
	return fd, nil
}

func (c *cowImage) Size() uint64 { return c.size }

// newImageFromFile maps a saved image: the page cache backs it, so processes that start from the same file
// share its pages.
func newImageFromFile(path string) (Image, error) {
	f, err := OpenRead(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("engine: image %s: empty, unreadable or not a regular file", path)
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	c := &cowImage{fd: fd, size: uint64(fi.Size()), pool: map[uint64][]*mmapMemory{}, remapReset: !hasPagemap || forceFileImage}
	if c.src, err = unix.Mmap(fd, 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("engine: image %s: %w", path, err)
	}
	return c, nil
}

func (c *cowImage) Allocator(limit uint64) MemoryAllocator { return imageAllocator{c: c, limit: limit} }

// imageAllocator allocates memories that start as a copy-on-write view of c; it is also an ImageMapper, for
// engines that allocate memory themselves.
type imageAllocator struct {
	c     *cowImage
	limit uint64
}

func (a imageAllocator) Allocate(max uint64) LinearMemory {
	c := a.c
	if max == 0 || max > a.limit {
		max = a.limit
	}
	max = maxU64(max, c.size) // callers check the limit against the image size first
	if m := c.get(max); m != nil {
		return m
	}
	m, err := reserve(max)
	if err != nil {
		return c.copyOut(max)
	}
	if err := c.mapAt(m.region); err != nil {
		m.Free()
		return c.copyOut(max)
	}
	m.size = c.size
	m.release = c.put
	m.image = c
	return m
}

var _ ImageMapper = imageAllocator{}

// Limit implements ImageMapper.
func (a imageAllocator) Limit() uint64 { return a.limit }

// ImageSize implements ImageMapper.
func (a imageAllocator) ImageSize() uint64 { return a.c.size }

// MapImage implements ImageMapper.
func (a imageAllocator) MapImage(mem []byte) error {
	return a.c.onRegion("map image", mem, a.c.mapAt)
}

// ResetMapped implements ImageMapper.
func (a imageAllocator) ResetMapped(mem []byte) error {
	c := a.c
	if c.remapReset {
		return c.onRegion("reset memory", mem, c.mapAt)
	}
	return c.onRegion("reset memory", mem, c.restore)
}

// onRegion checks that mem can hold the image at a page boundary and runs f on it while the image is open.
func (c *cowImage) onRegion(what string, mem []byte, f func([]byte) error) error {
	if c.size == 0 {
		return nil
	}
	if uint64(len(mem)) < c.size {
		return fmt.Errorf("engine: %s: a memory of %d bytes cannot hold an image of %d", what, len(mem), c.size)
	}
	if base := uintptr(unsafe.Pointer(&mem[0])); base%uintptr(os.Getpagesize()) != 0 {
		return fmt.Errorf("engine: %s: memory at %#x does not start on a page", what, base)
	}
	// Under inUse, so that Close cannot close fd (whose number another file could then take) or unmap src
	// meanwhile.
	c.inUse.RLock()
	defer c.inUse.RUnlock()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("engine: %s: the image is closed", what)
	}
	if err := f(mem); err != nil {
		return fmt.Errorf("engine: %s: %w", what, err)
	}
	return nil
}

func (c *cowImage) get(max uint64) *mmapMemory {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.pool[max]
	if len(list) == 0 {
		return nil
	}
	m := list[len(list)-1]
	c.pool[max] = list[:len(list)-1]
	m.peak, m.freed = 0, false
	return m
}

// put resets m to the image and keeps it for reuse; it reports false if m must be unmapped instead.
func (c *cowImage) put(m *mmapMemory) bool {
	c.inUse.RLock()
	defer c.inUse.RUnlock()
	c.mu.Lock()
	full := c.closed || len(c.pool[uint64(len(m.region))]) >= maxPooled
	c.mu.Unlock()
	if full || c.reset(m) != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.pool[uint64(len(m.region))]) >= maxPooled {
		return false
	}
	c.pool[uint64(len(m.region))] = append(c.pool[uint64(len(m.region))], m)
	return true
}

// resetInPlace resets m to the image for its instance's next run.
func (c *cowImage) resetInPlace(m *mmapMemory) error {
	c.inUse.RLock()
	defer c.inUse.RUnlock()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return errors.New("engine: memory image closed")
	case m.size != c.size:
		return fmt.Errorf("engine: memory grew from %d to %d bytes", c.size, m.size)
	}
	if err := c.reset(m); err != nil {
		return err
	}
	m.peak = m.size
	return nil
}

// reset restores every page of m that became private (written, hence copied) from the image, and drops what
// grew beyond the image. The kernel says which pages are private (privateRanges): present or swapped, and not
// the file's own. Pages still shared with the image file are already equal to it.
func (c *cowImage) reset(m *mmapMemory) error {
	if c.remapReset {
		return c.remap(m)
	}
	if err := c.dropGrowth(m); err != nil {
		return err
	}
	return c.restore(m.region)
}

// restore puts the first c.size bytes of region, where the image is mapped, back to the image: the pages that
// became private are copied back, or the image is mapped again when there are many of them.
func (c *cowImage) restore(region []byte) error {
	if c.size == 0 {
		return nil
	}
	var small [128][2]uint64 // a short run leaves about a hundred ranges: no allocation
	ranges, private := small[:0], uint64(0)
	err := privateRanges(uintptr(unsafe.Pointer(&region[0])), c.size, func(off, n uint64) {
		ranges = append(ranges, [2]uint64{off, n})
		private += n
	})
	if err != nil {
		return err
	}
	if private > c.size/remapFraction {
		return c.mapAt(region)
	}
	for _, r := range ranges {
		copy(region[r[0]:r[0]+r[1]], c.src[r[0]:r[0]+r[1]])
	}
	return nil
}

// remapFraction: a memory with more than 1/remapFraction of its image private is reset by mapping the image again
// rather than by copying. A page stays private after it is copied back, so without this every later reset of the
// memory would copy every page any of its runs wrote. Copying costs about 0.26 µs a page and a fault on a page
// mapped afresh about 4 µs (measured on a 2-core VM), so past an eighth of a 20 MiB image (640 pages, 0.17 ms a
// reset) one remap, and a fault on each page the next run touches, costs less within a few runs.
const remapFraction = 8

// dropGrowth releases what m grew beyond the image and makes it inaccessible again, so the next instance
// starts at the image's size.
func (c *cowImage) dropGrowth(m *mmapMemory) error {
	if m.size <= c.size {
		return nil
	}
	grown := m.region[c.size:m.size]
	if err := unix.Madvise(grown, unix.MADV_DONTNEED); err != nil {
		return err
	}
	if err := unix.Mprotect(grown, unix.PROT_NONE); err != nil {
		return err
	}
	m.size = c.size
	return nil
}

// remap resets m by dropping what grew beyond the image and mapping the image again over the rest: the new
// private mapping replaces the old one, private pages included, and the next instance faults pages in afresh.
func (c *cowImage) remap(m *mmapMemory) error {
	if err := c.dropGrowth(m); err != nil {
		return err
	}
	return c.mapAt(m.region)
}

// mapAt maps the image copy-on-write over the first c.size bytes of region. The caller holds inUse, or (Allocate)
// is the image's user, which closes it only after its last allocation. A failed
// MAP_FIXED may already have unmapped the range; it is then reserved again (inaccessible), so that no other
// mapping of the process can take those addresses before the region's owner unmaps it whole.
func (c *cowImage) mapAt(region []byte) error {
	if c.size == 0 {
		return nil
	}
	_, err := unix.MmapPtr(c.fd, 0, unsafe.Pointer(&region[0]), uintptr(c.size),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	if err != nil {
		_, _ = unix.MmapPtr(-1, 0, unsafe.Pointer(&region[0]), uintptr(c.size),
			unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE)
	}
	return err
}

func (c *cowImage) Close() error {
	c.inUse.Lock()
	defer c.inUse.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	for _, list := range c.pool {
		for _, m := range list {
			m.unmap()
		}
	}
	c.pool = nil
	if c.src != nil {
		_ = unix.Munmap(c.src)
		c.src = nil
	}
	return unix.Close(c.fd)
}

// copyOut is the fallback when mapping fails: a private copy of the image.
func (c *cowImage) copyOut(max uint64) LinearMemory {
	buf := make([]byte, c.size)
	for off := 0; off < len(buf); {
		n, err := unix.Pread(c.fd, buf[off:], int64(off))
		if err != nil || n == 0 {
			break
		}
		off += n
	}
	return &sliceMemory{max: max, buf: buf, peak: c.size}
}

func maxU64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// platformMemoryLimit reads the reservation size of a mapped memory.
func platformMemoryLimit(lm LinearMemory) (uint64, bool) {
	if m, ok := lm.(*mmapMemory); ok && m.region != nil {
		return uint64(len(m.region)), true
	}
	return 0, false
}

// PrivateBytes reports how many bytes of mem, a mapped memory, are private to it: written since they were mapped
// from an image, or anonymous memory in use. It needs /proc/self/pagemap (Linux); for the tests of engines that
// map images themselves.
func PrivateBytes(mem []byte) (uint64, error) {
	if len(mem) == 0 {
		return 0, nil
	}
	var n uint64
	err := privateRanges(uintptr(unsafe.Pointer(&mem[0])), uint64(len(mem)), func(_, k uint64) { n += k })
	return n, err
}
