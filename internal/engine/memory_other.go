//go:build !linux

package engine

func newLinearMemory(max uint64) LinearMemory { return &sliceMemory{max: max} }

func newImage(mem []byte) (Image, error) { return newCopyImage(mem), nil }
