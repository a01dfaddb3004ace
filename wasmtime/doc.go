// Package wasmtime builds the wasmtime engine (Cranelift, through cgo and wasmtime-go) into a program that
// imports it:
//
//	import _ "github.com/wasmbox/wasmbox/wasmtime"
//
// after which wasmbox.Config{Engine: "wasmtime"} selects it. It is a module of its own so that the wasmtime
// library (a download of about 57 MB with its prebuilt static libraries) is fetched only by programs that use
// it; the sandbox package itself is pure Go and runs on wazero. Building it needs cgo and a C toolchain; the
// prebuilt libraries cover linux and macOS on amd64 and arm64, and windows/amd64.
//
// The engine differs from wazero in two ways: its memory is its own (the sandbox's limit is enforced by the
// store's limiter, and a snapshot image is mapped copy-on-write over the start of each instance's memory on Linux
// and macOS, copied in elsewhere or where no image file can be made; only instances whose memory was mapped are
// recycled for later runs), and a deadline kill is a trap raised from inside the interpreter's tick import.
package wasmtime

import (
	"context"

	"github.com/wasmbox/wasmbox/internal/engine"
)

func init() {
	engine.Register("wasmtime", func(ctx context.Context, dir string) (engine.Engine, error) {
		return newWasmtime(ctx, wasmtimeConfig{CacheDir: dir})
	})
}
