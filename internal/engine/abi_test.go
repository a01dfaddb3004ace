package engine_test

import (
	"context"
	"testing"

	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/enginetest"
)

// TestCallIntoBounds: see enginetest.CheckCallInto.
func TestCallIntoBounds(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.NewWazero(ctx, engine.WazeroConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	mod, err := eng.Compile(ctx, enginetest.ABIModule())
	if err != nil {
		t.Fatal(err)
	}
	host := &enginetest.EchoHost{}
	inst, err := mod.Instantiate(ctx, engine.InstanceConfig{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close(ctx)
	enginetest.CheckCallInto(t, inst, host)
}
