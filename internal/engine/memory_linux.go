//go:build linux

package engine

import (
	"golang.org/x/sys/unix"
)

// mmapMemory reserves max bytes of address space with PROT_NONE and makes pages accessible as the memory grows,
// so the buffer never moves and untouched pages cost nothing.
type mmapMemory struct {
	region []byte
	size   uint64
	peak   uint64
}

func newLinearMemory(max uint64) LinearMemory {
	if max == 0 {
		return &sliceMemory{max: 0}
	}
	region, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return &sliceMemory{max: max}
	}
	return &mmapMemory{region: region}
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
	m.peak = max(m.peak, size)
	return m.region[:size:size]
}

func (m *mmapMemory) Free() {
	if m.region != nil {
		_ = unix.Munmap(m.region)
		m.region = nil
	}
}

func (m *mmapMemory) Peak() uint64 { return m.peak }
