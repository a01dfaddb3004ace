// Package cli is the wasmbox command (cmd/wasmbox) as a package, so that builds of the command with more
// runtimes linked in (the sci module's cmd/wasmbox) share every line of it. Main is the whole command; see
// cmd/wasmbox for its usage, flags and exit codes.
package cli
