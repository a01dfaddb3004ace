//go:build !unix

package engine

import "os"

func mapFile(f *os.File, size int) (*MappedFile, error) { return readFile(f, size) }

// OpenRead opens path for reading.
func OpenRead(path string) (*os.File, error) { return os.Open(path) }
