//go:build !linux && !darwin

package engine

import "os"

func newLinearMemory(max uint64) LinearMemory { return &sliceMemory{max: max} }

func newImage(mem []byte) (Image, error) { return newCopyImage(mem), nil }

func newImageFromFile(path string) (Image, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return newCopyImage(b), nil
}

func platformMemoryLimit(LinearMemory) (uint64, bool) { return 0, false }
