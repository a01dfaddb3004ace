//go:build darwin

package engine

// memfdCreate is nil: macOS has no memfd, so images live in unlinked temporary files.
var memfdCreate func() (int, error)

const hasPagemap = false
