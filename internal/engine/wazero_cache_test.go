package engine

import (
	"context"
	"os"
	"testing"
)

// WazeroCodeFile predicts where wazero's compilation cache puts a module's code; precompiled directories and the
// cache's size cap rely on it. A wazero upgrade that changes its naming makes this fail.
func TestWazeroCodeFile(t *testing.T) {
	// (module (func)) with one empty function.
	wasm := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // type section: func () -> ()
		"\x03\x02\x01\x00" + // function section
		"\x0a\x04\x01\x02\x00\x0b") // code section: one body, no locals, end
	dir := t.TempDir()
	want := WazeroCodeFile(dir, wasm)
	if _, err := os.Stat(want); err == nil {
		t.Fatal("the file exists before compiling")
	}
	ctx := context.Background()
	eng, err := NewWazero(ctx, WazeroConfig{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	if _, err := eng.Compile(ctx, wasm); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(want); err != nil {
		entries, _ := os.ReadDir(WazeroCodeDir(dir))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("compiled code is not at %s (the directory holds %v): %v", want, names, err)
	}
}
