package assets

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// A Runtime is a named interpreter that programs can select by name (wasmbox.Config.Runtime, the CLI's
// --runtime). "base" is the embedded interpreter of this package; others register themselves from modules of
// their own, so a program that never imports them never downloads or links them: importing
// github.com/wasmbox/wasmbox/sci registers "sci" (numpy and pandas).
type Runtime struct {
	// Name is what Config.Runtime and --runtime select ("base", "sci").
	Name string
	// Description is one line for listings (wasmbox version --json).
	Description string
	// Preload is the modules a sandbox of this runtime imports once, before its snapshot, when the caller's
	// Config.Preload is nil (numpy and pandas for "sci"): runs then start with them imported.
	Preload []string
	// Packages names the packages built into the interpreter with their versions ("numpy" -> "2.2.4"), so an
	// install of one of them can say it is built in.
	Packages map[string]string
	// Load returns the verified interpreter. It is called at most once per process (the result is cached).
	Load func() (*Interpreter, error)
}

var (
	runtimesMu sync.Mutex
	runtimes   = map[string]*registered{}
)

type registered struct {
	rt   Runtime
	once sync.Once
	it   *Interpreter
	err  error
}

// knownRuntimes names where the runtimes that are not linked in come from, for the error that says so.
var knownRuntimes = map[string]string{
	"sci": "github.com/wasmbox/wasmbox/sci (numpy and pandas; its own Go module: import it, or use the wasmbox-sci CLI it builds)",
}

func init() {
	RegisterRuntime(Runtime{Name: "base", Description: "CPython " + PythonVersion + " with its standard library",
		Load: Load})
}

// RegisterRuntime makes rt selectable by name. It panics on an empty name, a nil Load or a name registered twice
// (a programming error, found at init).
func RegisterRuntime(rt Runtime) {
	if rt.Name == "" || rt.Load == nil {
		panic("assets: RegisterRuntime needs a name and a Load function")
	}
	runtimesMu.Lock()
	defer runtimesMu.Unlock()
	if _, dup := runtimes[rt.Name]; dup {
		panic("assets: runtime " + rt.Name + " registered twice")
	}
	rt.Preload, rt.Packages = slices.Clone(rt.Preload), maps.Clone(rt.Packages)
	runtimes[rt.Name] = &registered{rt: rt}
}

// ErrNoRuntime reports a runtime name that no linked-in package registered.
var ErrNoRuntime = errors.New("assets: runtime not linked in")

// LookupRuntime returns the runtime registered under name ("" means "base"). An unknown name is an error that
// wraps ErrNoRuntime and says which module provides it, when one is known.
func LookupRuntime(name string) (Runtime, error) {
	if name == "" {
		name = "base"
	}
	runtimesMu.Lock()
	r, ok := runtimes[name]
	runtimesMu.Unlock()
	if !ok {
		if from, known := knownRuntimes[name]; known {
			return Runtime{}, fmt.Errorf("%w: %q is not in this program; it comes from %s", ErrNoRuntime, name, from)
		}
		return Runtime{}, fmt.Errorf("%w: unknown runtime %q (have %v)", ErrNoRuntime, name, Runtimes())
	}
	rt := r.rt
	rt.Load = r.load
	rt.Preload, rt.Packages = slices.Clone(rt.Preload), maps.Clone(rt.Packages)
	return rt, nil
}

func (r *registered) load() (*Interpreter, error) {
	r.once.Do(func() {
		r.it, r.err = r.rt.Load()
		if r.err == nil && r.it == nil {
			r.err = fmt.Errorf("assets: runtime %s: Load returned no interpreter", r.rt.Name)
		}
	})
	return r.it, r.err
}

// Runtimes lists the names of the registered runtimes, sorted.
func Runtimes() []string {
	runtimesMu.Lock()
	defer runtimesMu.Unlock()
	names := make([]string, 0, len(runtimes))
	for n := range runtimes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
