//go:build !linux && !darwin

package engine

import (
	"errors"
	"os"
)

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

// PrivateBytes needs /proc/self/pagemap, which this system does not have.
func PrivateBytes([]byte) (uint64, error) {
	return 0, errors.New("engine: no /proc/self/pagemap on this system")
}
