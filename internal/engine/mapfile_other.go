//go:build !unix

package engine

import "os"

func mapFile(f *os.File, size int) (*MappedFile, error) { return readFile(f, size) }
