//go:build wasmtime

package wasmbox

import (
	"context"

	"github.com/wasmbox/wasmbox/internal/engine"
)

// EngineName names the engine this build runs the interpreter on (built with -tags wasmtime: cgo, wasmtime-go).
const EngineName = "wasmtime"

func newEngine(ctx context.Context, cacheDir string) (engine.Engine, error) {
	return engine.NewWasmtime(ctx, engine.WasmtimeConfig{CacheDir: cacheDir})
}
