//go:build wasmtime_scratch

package engine

import (
	"fmt"
	"testing"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/internal/wasmbin"
)

func TestScratchImports(t *testing.T) {
	a, err := assets.Load()
	if err != nil {
		t.Fatal(err)
	}
	m, err := wasmbin.Decode(a.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range m.Imports() {
		ft := ""
		if im.Kind == 0 {
			ft = fmt.Sprint(m.Types()[im.TypeIndex])
		}
		fmt.Printf("%s.%s kind=%d %s %+v\n", im.Module, im.Name, im.Kind, ft, im.Limits)
	}
	for _, ex := range m.Exports() {
		fmt.Printf("E %s %d\n", ex.Name, ex.Kind)
	}
}
