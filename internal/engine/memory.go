package engine

import (
	"errors"
	"fmt"
)

// MemoryAllocator supplies the linear memory of one instance. Limit is the most memory the guest may ever have;
// growing past it fails (memory.grow returns -1, so CPython raises MemoryError).
type MemoryAllocator interface {
	// Allocate returns the backing memory for an instance whose memory may reach max bytes.
	Allocate(max uint64) LinearMemory
}

// LinearMemory is the engine-independent view of one instance's memory.
type LinearMemory interface {
	// Reallocate grows the memory to size bytes, returning nil if it cannot.
	Reallocate(size uint64) []byte
	// Free releases it.
	Free()
	// Peak is the largest size ever reached.
	Peak() uint64
}

// LimitedAllocator returns an allocator that refuses to grow past limit bytes. On Linux it reserves address space
// once and never moves the buffer; elsewhere it copies on growth.
func LimitedAllocator(limit uint64) MemoryAllocator { return limitedAllocator{limit: limit} }

type limitedAllocator struct{ limit uint64 }

func (a limitedAllocator) Allocate(max uint64) LinearMemory {
	if max == 0 || max > a.limit {
		max = a.limit
	}
	return newLinearMemory(max)
}

// sliceMemory is the portable fallback: a Go slice that is copied when it grows.
type sliceMemory struct {
	buf  []byte
	max  uint64
	peak uint64
	// image is what the memory started as (a copyImage's), for ResetToImage; nil for a plain memory.
	image []byte
}

// ResetToImage implements ImageMemory by copying the image back.
func (m *sliceMemory) ResetToImage() error {
	switch {
	case m.image == nil:
		return errors.New("engine: memory has no image to go back to")
	case len(m.buf) != len(m.image):
		return fmt.Errorf("engine: memory grew from %d to %d bytes", len(m.image), len(m.buf))
	}
	copy(m.buf, m.image)
	m.peak = uint64(len(m.buf))
	return nil
}

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	size = max(size, uint64(len(m.buf))) // never shrinks; an image's memory starts at the image's size
	if size > uint64(cap(m.buf)) {
		nb := make([]byte, size, min(m.max, max(size, 2*uint64(cap(m.buf)))))
		copy(nb, m.buf)
		m.buf = nb
	}
	m.buf = m.buf[:size]
	m.peak = max(m.peak, size)
	return m.buf
}

func (m *sliceMemory) Free()        { m.buf = nil }
func (m *sliceMemory) Peak() uint64 { return m.peak }

// Image is a captured linear memory that new instances start from (the snapshot of an initialised
// interpreter). On Linux it lives in a memfd mapped copy-on-write into each instance; elsewhere it is copied.
type Image interface {
	// Allocator supplies memories that start as a copy of the image and may grow to limit bytes.
	Allocator(limit uint64) MemoryAllocator
	// Size is the image's size in bytes.
	Size() uint64
	// Close releases the image; memories already allocated stay valid.
	Close() error
}

// An ImageMapper is an allocator whose memories start from an Image in a file, for an engine that allocates
// linear memory itself (wasmtime): it maps the image over that memory instead of copying it, so that instances
// share the image's pages until they write them.
type ImageMapper interface {
	MemoryAllocator
	// Limit is the most memory a guest may have.
	Limit() uint64
	// ImageSize is the image's length in bytes.
	ImageSize() uint64
	// MapImage maps the image copy-on-write over the start of mem, which must begin on a page boundary and hold
	// at least ImageSize bytes; what mem held there is replaced. It fails once the image is closed. After an
	// error, mem's first ImageSize bytes may be unmapped: the memory must not be used again.
	MapImage(mem []byte) error
	// ResetMapped puts the first ImageSize bytes of mem, mapped by MapImage, back to the image: the pages written
	// since are copied back from it (the kernel lists them), or the image is mapped over them again. After an
	// error the memory must not be used again.
	ResetMapped(mem []byte) error
}

// NewImage captures mem (copied; the caller may reuse it).
func NewImage(mem []byte) (Image, error) { return newImage(mem) }

// NewImageFromFile uses a file written earlier (the raw bytes of a memory) as an image. The file must not change
// while the image is in use.
func NewImageFromFile(path string) (Image, error) { return newImageFromFile(path) }

type allocatorFunc func(max uint64) LinearMemory

func (f allocatorFunc) Allocate(max uint64) LinearMemory { return f(max) }

// copyImage is the portable image: every memory is a fresh copy.
type copyImage struct{ mem []byte }

func newCopyImage(mem []byte) *copyImage { return &copyImage{mem: append([]byte(nil), mem...)} }

func (c *copyImage) Size() uint64 { return uint64(len(c.mem)) }
func (c *copyImage) Close() error { return nil }

func (c *copyImage) Allocator(limit uint64) MemoryAllocator {
	return allocatorFunc(func(max uint64) LinearMemory {
		if max == 0 || max > limit {
			max = limit
		}
		m := &sliceMemory{max: max, buf: append(make([]byte, 0, len(c.mem)), c.mem...), image: c.mem}
		m.peak = uint64(len(m.buf))
		return m
	})
}

// AllocatorLimit reports the limit of an allocator made by LimitedAllocator, for engines that allocate linear
// memory themselves and only need its bound.
func AllocatorLimit(a MemoryAllocator) (uint64, bool) {
	la, ok := a.(limitedAllocator)
	return la.limit, ok
}

// MemoryLimit reports the most memory lm may reach, for the memories this package makes.
func MemoryLimit(lm LinearMemory) (uint64, bool) {
	if s, ok := lm.(*sliceMemory); ok {
		return s.max, true
	}
	return platformMemoryLimit(lm)
}
