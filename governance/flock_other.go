//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package governance

import "os"

// lockFile is a no-op where flock(2) is not available: keep to one writer per file yourself.
func lockFile(*os.File) error { return nil }
