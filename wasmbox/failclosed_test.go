package wasmbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// without a usable interpreter New fails with a clear error; nothing runs anywhere else.
func TestFailClosedWithoutInterpreter(t *testing.T) {
	real, err := assets.Load()
	if err != nil {
		t.Fatal(err)
	}
	for name, it := range map[string]*assets.Interpreter{
		"not wasm":       {Wasm: []byte("#!/bin/sh\necho pwned\n"), WasmSHA256: "x1", Stdlib: real.Stdlib, TZData: real.TZData},
		"no exports":     {Wasm: []byte("\x00asm\x01\x00\x00\x00"), WasmSHA256: "x2", Stdlib: real.Stdlib, TZData: real.TZData},
		"no stdlib":      {Wasm: real.Wasm, WasmSHA256: real.WasmSHA256 + "-nostdlib"},
		"corrupt stdlib": {Wasm: real.Wasm, WasmSHA256: real.WasmSHA256 + "-badzip", Stdlib: []byte("not a zip"), TZData: real.TZData},
	} {
		sb, err := wasmbox.New(context.Background(), wasmbox.Config{Interpreter: it, DisableCompileCache: true})
		if !errors.Is(err, wasmbox.ErrInterpreter) || sb != nil {
			t.Errorf("%s: New = %v, %v; want ErrInterpreter", name, sb, err)
		}
	}
}
