//go:build !wasmtime

package wasmbox

import (
	"context"

	"github.com/wasmbox/wasmbox/internal/engine"
)

// EngineName names the engine this build runs the interpreter on.
const EngineName = "wazero"

func newEngine(ctx context.Context, cacheDir string) (engine.Engine, error) {
	return engine.NewWazero(ctx, engine.WazeroConfig{CacheDir: cacheDir})
}
