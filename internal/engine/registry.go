package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// NewFunc creates an engine that keeps its compiled modules under cacheDir ("" for none).
type NewFunc func(ctx context.Context, cacheDir string) (Engine, error)

var registry struct {
	mu      sync.Mutex
	engines map[string]NewFunc
}

// Register makes an engine available by name. wazero registers itself; engines kept in their own modules (the
// wasmtime engine, whose cgo library would otherwise weigh on every application's module graph) register from
// the init function of their package, so importing that package is what builds them in. Registering a name twice
// panics: two engines must not silently replace each other.
func Register(name string, newEngine NewFunc) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.engines == nil {
		registry.engines = map[string]NewFunc{}
	}
	if _, dup := registry.engines[name]; dup || name == "" || newEngine == nil {
		panic(fmt.Sprintf("engine: Register %q: empty, nil or registered twice", name))
	}
	registry.engines[name] = newEngine
}

// Lookup returns the engine registered as name.
func Lookup(name string) (NewFunc, bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	f, ok := registry.engines[name]
	return f, ok
}

// Names lists the registered engines, sorted.
func Names() []string {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	names := make([]string, 0, len(registry.engines))
	for n := range registry.engines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func init() {
	Register("wazero", func(ctx context.Context, dir string) (Engine, error) {
		return NewWazero(ctx, WazeroConfig{CacheDir: dir})
	})
}
