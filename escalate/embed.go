package escalate

import _ "embed"

// The Python side, copied into every run directory (RunDir): the bootstrap (the container's first process) and
// the tool client, importable as wasmbox_tools.
var (
	//go:embed python/boot.py
	bootPy []byte
	//go:embed python/wasmbox_tools.py
	toolsPy []byte
)
