package assets

import (
	"errors"
	"strings"
	"testing"
)

func TestRuntimeRegistry(t *testing.T) {
	base, err := LookupRuntime("")
	if err != nil || base.Name != "base" {
		t.Fatalf("default runtime: %+v, %v", base, err)
	}
	it, err := base.Load()
	if err != nil || len(it.Wasm) == 0 {
		t.Fatalf("base Load: %v", err)
	}
	again, _ := base.Load()
	if again != it {
		t.Fatal("Load is not cached")
	}
	// sci is known but not linked into this test binary: the error names the module to import.
	_, err = LookupRuntime("sci")
	if !errors.Is(err, ErrNoRuntime) || !strings.Contains(err.Error(), "github.com/wasmbox/wasmbox/sci") {
		t.Fatalf("sci: %v", err)
	}
	_, err = LookupRuntime("nope")
	if !errors.Is(err, ErrNoRuntime) || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "base") {
		t.Fatalf("unknown: %v", err)
	}
	RegisterRuntime(Runtime{Name: "test-rt", Preload: []string{"json"}, Packages: map[string]string{"x": "1"},
		Load: func() (*Interpreter, error) { return nil, nil }})
	rt, err := LookupRuntime("test-rt")
	if err != nil {
		t.Fatal(err)
	}
	rt.Preload[0], rt.Packages["x"] = "changed", "2" // a caller's copy: the registry keeps its own
	if rt2, _ := LookupRuntime("test-rt"); rt2.Preload[0] != "json" || rt2.Packages["x"] != "1" {
		t.Fatalf("registry shares its slices: %+v", rt2)
	}
	if _, err := rt.Load(); err == nil {
		t.Fatal("a Load returning no interpreter and no error must be an error")
	}
	for name, rt := range map[string]Runtime{"duplicate": {Name: "base", Load: Load}, "no name": {Load: Load}, "no Load": {Name: "x"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			RegisterRuntime(rt)
		}()
	}
}
