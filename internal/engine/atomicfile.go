package engine

import (
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to a temporary file in path's directory (mode 0600, named ".tmp-*", which the
// cache cap skips) and renames it to path, so readers see the old file, the new one or none, never a part.
func WriteFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
