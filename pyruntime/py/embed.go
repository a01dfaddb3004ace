// Package py holds the Python side of wasmbox that is not compiled into the interpreter: the run driver
// installed into every interpreter before its first run.
package py

import _ "embed"

// Boot is the source of the _wasmbox_boot module (see _wasmbox_boot.py): the fixed driver of every run.
//
//go:embed _wasmbox_boot.py
var Boot string
