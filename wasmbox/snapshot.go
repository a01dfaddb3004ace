package wasmbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
	sm, err := it.snapshotWasm(sp)
	if err != nil {
		return nil, err
	}
	defer func() { sm.close() }() // wazero keeps no reference to the bytes it decodes
	starttrace.Mark("snapshot: map module wasm")
	mod, err := it.compileID(context.WithoutCancel(ctx), sm.wasm, sm.id, "snapshot module")
	if err != nil && sm.cachePath != "" {
		// A module in the cache that does not compile (damaged) is removed and made again from the interpreter.
		sm.close()
		_ = os.Remove(sm.cachePath)
		_ = os.Remove(filepath.Join(filepath.Dir(sm.cachePath), snapshotModuleID(filepath.Base(sm.cachePath))))
		if sm, err = it.snapshotWasm(sp); err != nil {
			sm = &snapModuleBytes{close: func() {}}
			return nil, err
		}
		mod, err = it.compileID(context.WithoutCancel(ctx), sm.wasm, sm.id, "snapshot module")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot module: %w", ErrInterpreter, err)
	}
	starttrace.Mark("snapshot: compile module (the engine decodes, validates, loads cached code)")
	if it.snapMods == nil {
		it.snapMods = map[uint64]engine.Module{}
	}
	it.snapMods[sp] = mod
	return mod, nil
}

// snapModuleBytes is the snapshot module's wasm and, when known, wazero's ID of it (nil: not known, to be
// computed by hashing the module).
type snapModuleBytes struct {
	wasm  []byte
	id    *[sha256.Size]byte
	close func()
	// cachePath is the cache file the bytes were mapped from ("" if they were made now or are precompiled).
	cachePath string
}

// snapshotModuleID names the file next to a saved snapshot module that holds its wazero module ID (hex), so that
// a later process finds the module's compiled code without a pass over the module. It is trusted like the module
// next to it; a wrong one costs only a wrong guess of whether the cache holds the code (wazero hashes the module
// itself to find the code it loads).
func snapshotModuleID(name string) string { return strings.TrimSuffix(name, ".wasm") + ".id" }

func parseModuleID(b []byte) (*[sha256.Size]byte, bool) {
	var id [sha256.Size]byte
	if n, err := hex.Decode(id[:], bytes.TrimSpace(b)); err != nil || n != sha256.Size {
		return nil, false
	}
	return &id, true
}

// snapshotWasm rewrites the interpreter for snapshots, or maps the rewrite that a precompiled directory holds or
// an earlier process saved next to the compilation cache (it depends only on the interpreter and the stack
// pointer).
func (it *interp) snapshotWasm(sp uint64) (*snapModuleBytes, error) {
	// "r": the rewrite adds wasmbin.ResetSection; files saved before it lack the section, so they are not used.
	name := fmt.Sprintf("module-r-%s-%d.wasm", it.codeID, sp)
	if it.precompiled != nil {
		m, err := it.precompiled.mapFile("snapshots/" + name)
		if err == nil {
			sm := &snapModuleBytes{wasm: m.Bytes, close: func() { _ = m.Close() }}
			if p, err := it.precompiled.file("snapshots/" + snapshotModuleID(name)); err == nil {
				if b, err := engine.ReadSmallFile(p, maxRecordBytes); err == nil {
					sm.id, _ = parseModuleID(b)
				}
			} else if !errors.Is(err, fs.ErrNotExist) {
				sm.close()
				return nil, err
			}
			return sm, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	var path string
	if it.cacheDir != "" {
		path = filepath.Join(it.cacheDir, "snapshots", name)
		if m, err := engine.MapFile(path); err == nil {
			touch(path)
			sm := &snapModuleBytes{wasm: m.Bytes, close: func() { _ = m.Close() }, cachePath: path}
			if b, err := engine.ReadSmallFile(filepath.Join(it.cacheDir, "snapshots", snapshotModuleID(name)), maxRecordBytes); err == nil {
				sm.id, _ = parseModuleID(b)
			}
			if sm.id == nil { // saved by an older wasmbox: name its code once, for the next process
				var id [sha256.Size]byte
				if err := engine.ReadGuard(func() error { id = engine.WazeroModuleID(m.Bytes); return nil }); err != nil {
					sm.close()
					return nil, err
				}
				sm.id = &id
				_ = engine.WriteFileAtomic(filepath.Join(it.cacheDir, "snapshots", snapshotModuleID(name)), []byte(hex.EncodeToString(id[:])+"\n"))
			}
			return sm, nil
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
	id := engine.WazeroModuleID(wasm)
	if path != "" && os.MkdirAll(filepath.Dir(path), 0o700) == nil {
		if engine.WriteFileAtomic(path, wasm) == nil {
			_ = engine.WriteFileAtomic(filepath.Join(filepath.Dir(path), snapshotModuleID(name)), []byte(hex.EncodeToString(id[:])+"\n"))
		}
	}
	return &snapModuleBytes{wasm: wasm, id: &id, close: func() {}}, nil
}
