//go:build unix && !linux

package mcp

// Without Linux's child subreaper and procfs, a descendant that left the server's process group (setsid) is
// not tracked: it is reparented to init and outlives the server. Run servers you do not trust in a container.
func becomeSubreaper() bool { return false }

func descendants(int) []int { return nil }

func parentOf(int) (int, bool) { return 0, false }
