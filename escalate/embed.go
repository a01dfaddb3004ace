package escalate

import (
	_ "embed"
	"strings"

	"github.com/wasmbox/wasmbox/hostfuncs"
)

// The Python side, copied into every run directory (RunDir): the bootstrap (the container's first process) and
// the tool client, importable as wasmbox_tools.
var (
	//go:embed python/boot.py
	bootPy []byte
	//go:embed python/wasmbox_tools.py
	toolsPySource string

	// toolsPy is the client with the exception hierarchy of the wasm tools module (one source for both).
	toolsPy = []byte(strings.Replace(toolsPySource, "# @@EXCEPTIONS@@ (replaced by hostfuncs.PythonExceptions when the client is embedded)\n", hostfuncs.PythonExceptions, 1))
)
