package wasmbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/starttrace"
	"github.com/wasmbox/wasmbox/internal/wasmbin"
)

// snapshot is an initialised interpreter every run starts from: the memory image after init + prepare, and a
// module rewritten to start from it (no data segments, no _initialize).
type snapshot struct {
	mod   engine.Module
	image engine.Image
}

// takeSnapshot initialises an interpreter with the sandbox's configuration (driver, tools module, preloads,
// randomness) and captures it.
func (s *Sandbox) takeSnapshot(ctx context.Context) (*snapshot, error) {
	key := s.snapshotKey(prepareSource(s.cfg.Preload, s.toolsModule))
	snap, err := s.loadSnapshot(ctx, key)
	if err == nil {
		return snap, nil
	}
	if errors.Is(err, ErrPrecompiled) { // a damaged precompiled directory is refused, never worked around
		return nil, err
	}
	g, err := s.initGuest(ctx)
	if err != nil {
		return nil, err
	}
	defer g.close(ctx)
	sp, ok := g.inst.Global(hostfuncs.ExportStackPtr)
	if !ok {
		return nil, fmt.Errorf("%w: the interpreter does not export %s", ErrInterpreter, hostfuncs.ExportStackPtr)
	}
	mem := g.inst.MemoryBytes()
	if uint64(len(mem)) > uint64(s.cfg.MemoryLimit) {
		return nil, fmt.Errorf("%w: MemoryLimit %d is below the initialised interpreter's %d bytes", ErrInvalidConfig, s.cfg.MemoryLimit, len(mem))
	}
	image, err := engine.NewImage(mem)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInternal, err)
	}
	mod, err := s.it.snapshotModule(ctx, sp)
	if err != nil {
		_ = image.Close()
		return nil, err
	}
	s.saveSnapshot(key, mem, sp)
	return &snapshot{mod: mod, image: image}, nil
}

// snapshotModule compiles, once per stack pointer value (in practice once), the interpreter rewritten to start
// from a snapshot. Its bytes do not depend on the snapshot's contents or size (the memory allocator supplies
// the image and its size), so it is compiled once and hits the on-disk cache in later processes.
func (it *interp) snapshotModule(ctx context.Context, sp uint64) (engine.Module, error) {
	it.snapMu.Lock()
	defer it.snapMu.Unlock()
	if m, ok := it.snapMods[sp]; ok {
		return m, nil
	}
	wasm, err := it.snapshotWasm(sp)
	if err != nil {
		return nil, err
	}
	starttrace.Mark("snapshot: read module wasm")
	mod, err := it.compile(context.WithoutCancel(ctx), wasm, "snapshot module")
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot module: %w", ErrInterpreter, err)
	}
	starttrace.Mark("snapshot: wazero CompileModule (decode, validate, cache load)")
	if it.snapMods == nil {
		it.snapMods = map[uint64]engine.Module{}
	}
	it.snapMods[sp] = mod
	return mod, nil
}

// snapshotWasm rewrites the interpreter for snapshots, or reads the rewrite that a precompiled directory holds or
// an earlier process saved next to the compilation cache (it depends only on the interpreter and the stack
// pointer).
func (it *interp) snapshotWasm(sp uint64) ([]byte, error) {
	name := fmt.Sprintf("module-%s-%d.wasm", it.codeID, sp)
	if it.precompiled != nil {
		p, err := it.precompiled.file("snapshots/" + name)
		if err == nil {
			if b, err := os.ReadFile(p); err == nil {
				return b, nil
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	var path string
	if it.cacheDir != "" {
		path = filepath.Join(it.cacheDir, "snapshots", name)
		if b, err := os.ReadFile(path); err == nil {
			touch(path)
			return b, nil
		}
	}
	orig, err := it.wasmBytes()
	if err != nil {
		return nil, err
	}
	globals := map[string]uint64{hostfuncs.ExportStackPtr: sp}
	m, err := wasmbin.Decode(orig)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot module: %w", ErrInterpreter, err)
	}
	if _, ok := m.Export(hostfuncs.ExportFuel); ok { // absent only from the uninstrumented build (bench/)
		globals[hostfuncs.ExportFuel] = hostfuncs.TickInterval
	}
	wasm, err := wasmbin.RewriteForSnapshot(orig, globals, 0, []string{hostfuncs.ExportInitialize})
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot module: %w", ErrInterpreter, err)
	}
	if path != "" && os.MkdirAll(filepath.Dir(path), 0o700) == nil {
		_ = writeFileAtomic(path, wasm)
	}
	return wasm, nil
}
