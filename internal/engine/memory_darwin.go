//go:build darwin

package engine

import "errors"

// memfdCreate is nil: macOS has no memfd, so images live in unlinked temporary files.
var memfdCreate func() (int, error)

const hasPagemap = false

// privateRanges is never called on macOS: images there are reset by mapping them again.
func privateRanges(uintptr, uint64, func(off, n uint64)) error {
	return errors.New("engine: no /proc/self/pagemap on this system")
}
