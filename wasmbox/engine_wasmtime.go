//go:build wasmtime

package wasmbox

import (
	"context"

	"github.com/wasmbox/wasmbox/internal/engine"
)

func init() {
	engines["wasmtime"] = func(ctx context.Context, dir string) (engine.Engine, error) {
		return engine.NewWasmtime(ctx, engine.WasmtimeConfig{CacheDir: dir})
	}
}
