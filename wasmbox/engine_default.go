package wasmbox

import (
	"context"
	"fmt"
	"sort"

	"github.com/wasmbox/wasmbox/internal/engine"
)

// engines are the engines built into this binary. wazero is always there; wasmtime only in builds with
// -tags wasmtime (cgo).
var engines = map[string]func(ctx context.Context, cacheDir string) (engine.Engine, error){
	"wazero": func(ctx context.Context, dir string) (engine.Engine, error) {
		return engine.NewWazero(ctx, engine.WazeroConfig{CacheDir: dir})
	},
}

// Engines lists the engines built into this binary, for Config.Engine.
func Engines() []string {
	var names []string
	for n := range engines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func newEngine(ctx context.Context, name, cacheDir string) (engine.Engine, error) {
	if name == "" {
		name = "wazero"
	}
	mk, ok := engines[name]
	if !ok {
		return nil, fmt.Errorf("%w: engine %q is not built in (have %v; wasmtime needs -tags wasmtime)", ErrInvalidConfig, name, Engines())
	}
	return mk(ctx, cacheDir)
}
