package wasmbox

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/wasmbin"
	"github.com/wasmbox/wasmbox/internal/zipfs"
)

// The fixed guest layout. The order of the mounts is part of the contract with a snapshot: WASI preopens live in
// guest memory, so every instance must see the same mounts in the same order.
const (
	guestRoot      = "/"
	guestStdlib    = "/usr/local/lib/python3.13"
	guestZoneinfo  = "/usr/share/zoneinfo"
	guestPackages  = "/packages"
	guestWorkspace = "/workspace"
	guestTmp       = "/tmp"
	guestDev       = "/dev"
)

// guestLayout is the mount layout in order, part of every saved snapshot's key (the preopens live in guest memory).
var guestLayout = strings.Join([]string{guestRoot, guestStdlib, guestZoneinfo, guestPackages, guestWorkspace, guestTmp, guestDev}, "\n")

// interp is the compiled interpreter shared by every Sandbox of a process that uses the same artifact and cache.
type interp struct {
	eng      engine.Engine
	mod      engine.Module
	root     fs.FS
	stdlib   fs.FS
	zoneinfo fs.FS
	sha256   string
	info     string
	wasm     []byte

	engine   string
	cacheDir string

	origOnce sync.Once
	origErr  error

	snapMu   sync.Mutex
	snapMods map[uint64]engine.Module
}

// interpKey identifies a compiled interpreter. content is the SHA-256 of the interpreter's wasm, stdlib and
// tzdata as given, so two Interpreters that differ in any of them (or that declare a hash that is not their
// code's) never share a compiled module or a file system.
type interpKey struct {
	content          [sha256.Size]byte
	cacheDir, engine string
}

var (
	interpMu    sync.Mutex
	interpCache = map[interpKey]*interpEntry{}
)

type interpEntry struct {
	once sync.Once
	it   *interp
	err  error
}

// loadInterp compiles the embedded interpreter once per process (per compile-cache directory).
func loadInterp(ctx context.Context, a *assets.Interpreter, engineName, cacheDir string) (*interp, error) {
	embedded := a == nil
	if embedded {
		var err error
		if a, err = assets.Load(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInterpreter, err)
		}
	}
	if len(a.Wasm) == 0 || len(a.Stdlib) == 0 {
		return nil, fmt.Errorf("%w: the interpreter has no wasm or no stdlib", ErrInterpreter)
	}
	key := interpKey{cacheDir: cacheDir, engine: engineName}
	if embedded {
		key.content = embeddedKey() // verified by assets.Load; hashed once per process
	} else {
		key.content = contentKey(a)
	}
	interpMu.Lock()
	e, ok := interpCache[key]
	if !ok {
		e = &interpEntry{}
		interpCache[key] = e
	}
	interpMu.Unlock()
	e.once.Do(func() { e.it, e.err = compileInterp(context.WithoutCancel(ctx), a, engineName, cacheDir) })
	return e.it, e.err
}

var embeddedKey = sync.OnceValue(func() [sha256.Size]byte {
	a, err := assets.Load()
	if err != nil {
		return [sha256.Size]byte{}
	}
	return contentKey(a)
})

func contentKey(a *assets.Interpreter) [sha256.Size]byte {
	h := sha256.New()
	for _, b := range [][]byte{a.Wasm, a.Stdlib, a.TZData} {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func compileInterp(ctx context.Context, a *assets.Interpreter, engineName, cacheDir string) (*interp, error) {
	if cacheDir != "" {
		if err := os.MkdirAll(cacheDir, 0o700); err != nil {
			cacheDir = "" // an unusable cache directory only costs time
		}
	}
	// The zips first: a broken artifact fails before seconds of compilation.
	stdlib, err := zipFS(a.Stdlib)
	if err != nil {
		return nil, fmt.Errorf("%w: stdlib.zip: %w", ErrInterpreter, err)
	}
	tz, err := zipFS(a.TZData)
	if err != nil {
		return nil, fmt.Errorf("%w: tzdata.zip: %w", ErrInterpreter, err)
	}
	// The exports are checked on the decoded module: compiling it waits until an interpreter must be initialised
	// (a snapshot saved by an earlier process makes that unnecessary).
	m, err := wasmbin.Decode(a.Wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInterpreter, err)
	}
	for _, n := range []string{hostfuncs.ExportInitialize, hostfuncs.ExportABIVersion, hostfuncs.ExportInit,
		hostfuncs.ExportPrepare, hostfuncs.ExportExec, hostfuncs.ExportAlloc, hostfuncs.ExportFree, hostfuncs.ExportInterrupt} {
		if e, ok := m.Export(n); !ok || e.Kind != wasmbin.KindFunc {
			return nil, fmt.Errorf("%w: the interpreter does not export the function %s", ErrInterpreter, n)
		}
	}
	eng, err := newEngine(ctx, engineName, cacheDir)
	if err != nil {
		return nil, err
	}
	return &interp{eng: eng, root: rootFS, stdlib: stdlib, zoneinfo: tz, sha256: a.WasmSHA256, info: a.BuildInfo,
		wasm: a.Wasm, engine: engineName, cacheDir: cacheDir}, nil
}

// original compiles the interpreter as built (with its data segments), once: the module every snapshot is
// initialised from.
func (it *interp) original(ctx context.Context) (engine.Module, error) {
	it.origOnce.Do(func() {
		it.mod, it.origErr = it.eng.Compile(context.WithoutCancel(ctx), it.wasm)
		if it.origErr != nil {
			it.origErr = fmt.Errorf("%w: %w", ErrInterpreter, it.origErr)
		}
	})
	return it.mod, it.origErr
}

func zipFS(b []byte) (fs.FS, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	return zipfs.New(zr)
}

// rootFS is the read-only "/" of the guest: only the directories the mounts hang from.
var rootFS = func() fs.FS {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, d := range []string{"dev/", "packages/", "tmp/", "usr/local/lib/python3.13/", "usr/share/zoneinfo/", "workspace/"} {
		_, _ = zw.Create(d)
	}
	_ = zw.Close()
	f, err := zipFS(buf.Bytes())
	if err != nil {
		panic(err) // a fixed, valid archive
	}
	return f
}()

// Precompile compiles the interpreter of cfg into the on-disk compilation cache (cfg.CacheDir, or the default),
// then releases it: run it at image or install time so the first New of a process only loads the cache. It
// always compiles or loads anew and neither uses nor fills the process-wide compiled interpreter.
func Precompile(ctx context.Context, cfg Config) error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	a := c.Interpreter
	if a == nil {
		if a, err = assets.Load(); err != nil {
			return fmt.Errorf("%w: %w", ErrInterpreter, err)
		}
	}
	it, err := compileInterp(ctx, a, c.Engine, c.CacheDir)
	if err != nil {
		return err
	}
	defer it.eng.Close(ctx)
	_, err = it.original(ctx)
	return err
}
