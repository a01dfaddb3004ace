//go:build !unix

package mcp

import "os/exec"

// ownGroup does nothing where process groups are not available: the server's own process is stopped by
// closing its stdin, then killed; what it started itself is not tracked.
func ownGroup(*exec.Cmd) {}

func killGroup(*exec.Cmd, ...int) {}

func descendants(int) []int { return nil }
