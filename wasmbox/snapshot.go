package wasmbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
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
	if snap, err := s.loadSnapshot(ctx, key); err == nil {
		return snap, nil
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
	mod, err := it.eng.Compile(context.WithoutCancel(ctx), wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot module: %w", ErrInterpreter, err)
	}
	if it.snapMods == nil {
		it.snapMods = map[uint64]engine.Module{}
	}
	it.snapMods[sp] = mod
	return mod, nil
}

// snapshotWasm rewrites the interpreter for snapshots, or reads the rewrite an earlier process saved next to the
// compilation cache (it depends only on the interpreter and the stack pointer).
func (it *interp) snapshotWasm(sp uint64) ([]byte, error) {
	var path string
	if it.cacheDir != "" {
		path = filepath.Join(it.cacheDir, "snapshots", fmt.Sprintf("module-%s-%d.wasm", it.sha256, sp))
		if b, err := os.ReadFile(path); err == nil {
			return b, nil
		}
	}
	globals := map[string]uint64{hostfuncs.ExportStackPtr: sp}
	m, err := wasmbin.Decode(it.wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot module: %w", ErrInterpreter, err)
	}
	if _, ok := m.Export(hostfuncs.ExportFuel); ok { // absent only from the uninstrumented build (bench/)
		globals[hostfuncs.ExportFuel] = hostfuncs.TickInterval
	}
	wasm, err := wasmbin.RewriteForSnapshot(it.wasm, globals, 0, []string{hostfuncs.ExportInitialize})
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot module: %w", ErrInterpreter, err)
	}
	if path != "" && os.MkdirAll(filepath.Dir(path), 0o700) == nil {
		if f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*"); err == nil {
			_, werr := f.Write(wasm)
			if cerr := f.Close(); werr == nil && cerr == nil {
				_ = os.Rename(f.Name(), path)
			}
			os.Remove(f.Name())
		}
	}
	return wasm, nil
}
