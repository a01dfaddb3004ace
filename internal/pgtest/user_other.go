//go:build !unix

package pgtest

import "os/exec"

// serverUser: the server runs as this process's user.
func serverUser(string) (func(*exec.Cmd), error) { return nil, nil }
