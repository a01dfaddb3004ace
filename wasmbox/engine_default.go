package wasmbox

import (
	"context"
	"fmt"

	"github.com/wasmbox/wasmbox/internal/engine"
)

// Engines lists the engines built into this binary, for Config.Engine. wazero is always there; wasmtime (cgo)
// when the program imports github.com/wasmbox/wasmbox/wasmtime, a module of its own.
func Engines() []string { return engine.Names() }

func newEngine(ctx context.Context, name, cacheDir string) (engine.Engine, error) {
	if name == "" {
		name = "wazero"
	}
	mk, ok := engine.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: engine %q is not built in (have %v; wasmtime needs an import of github.com/wasmbox/wasmbox/wasmtime)", ErrInvalidConfig, name, Engines())
	}
	return mk(ctx, cacheDir)
}
