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
	enginetest.CheckCallIntoOn(t, eng)
}
