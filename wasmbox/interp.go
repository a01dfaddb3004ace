package wasmbox

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/starttrace"
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
	sha256   string // the SHA-256 the interpreter declares (reported by Info)
	info     string
	// codeID is the verified SHA-256 of the wasm (computed, or proved by a verified artifact-cache entry); dataID
	// identifies the stdlib and tzdata. Together they name everything the interpreter runs and reads at init.
	codeID, dataID string

	wasmOnce sync.Once
	wasmFn   func() ([]byte, error) // the interpreter's wasm, produced on first use
	wasm     []byte
	wasmErr  error

	engine   string
	cacheDir string
	maxBytes int64 // the cache's cap (Config.CacheMaxBytes)
	// precompiled is a read-only directory baked by PrecompileDir, consulted before cacheDir; "" if none.
	precompiled *precompiledDir

	origOnce sync.Once
	origErr  error

	snapMu   sync.Mutex
	snapMods map[uint64]engine.Module
}

// wasmBytes returns the interpreter's wasm, decompressing or reading it on first use (a process that starts from
// a saved snapshot never needs it).
func (it *interp) wasmBytes() ([]byte, error) {
	it.wasmOnce.Do(func() {
		it.wasm, it.wasmErr = it.wasmFn()
		if it.wasmErr != nil {
			it.wasmErr = fmt.Errorf("%w: %w", ErrInterpreter, it.wasmErr)
		}
	})
	return it.wasm, it.wasmErr
}

// interpKey identifies a compiled interpreter. content identifies the interpreter's wasm, stdlib and tzdata as
// given (hashed, or for the embedded one verified against SHA256SUMS), so two Interpreters that differ in any of
// them (or that declare a hash that is not their code's) never share a compiled module or a file system.
type interpKey struct {
	content                       [sha256.Size]byte
	cacheDir, engine, precompiled string
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

// source is an interpreter before compilation: its artifacts, identities and a way to get its wasm.
type source struct {
	declaredSHA, codeID, dataID string
	gzSHA                       string // the embedded interpreter's verified python.wasm.gz hash; "" for others
	stdlib, tzdata              []byte
	info                        string
	wasm                        func() ([]byte, error)
	// exportsChecked is set when a verified cache entry proves the wasm's exports were checked already.
	exportsChecked bool
}

func (src *source) key() [sha256.Size]byte {
	return sha256.Sum256([]byte(src.codeID + " " + src.dataID))
}

// customSource hashes a caller's interpreter: what it declares is not trusted as its identity.
func customSource(a *assets.Interpreter) (*source, error) {
	if len(a.Wasm) == 0 || len(a.Stdlib) == 0 {
		return nil, fmt.Errorf("%w: the interpreter has no wasm or no stdlib", ErrInterpreter)
	}
	code := sha256.Sum256(a.Wasm)
	h := sha256.New()
	for _, b := range [][]byte{a.Stdlib, a.TZData} {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	wasm := a.Wasm
	return &source{declaredSHA: a.WasmSHA256, codeID: hex.EncodeToString(code[:]), dataID: hex.EncodeToString(h.Sum(nil)),
		stdlib: a.Stdlib, tzdata: a.TZData, info: a.BuildInfo, wasm: func() ([]byte, error) { return wasm, nil }}, nil
}

// runtimeSources holds the identity of each registered runtime's interpreter, hashed once per process: the
// registry loads each runtime once and keeps it, so every Sandbox of that runtime has the same one.
var runtimeSources sync.Map // runtime name -> *runtimeSourceEntry

type runtimeSourceEntry struct {
	once sync.Once
	src  *source
	err  error
}

func runtimeSource(name string, a *assets.Interpreter) (*source, error) {
	v, _ := runtimeSources.LoadOrStore(name, &runtimeSourceEntry{})
	e := v.(*runtimeSourceEntry)
	e.once.Do(func() { e.src, e.err = customSource(a) })
	return e.src, e.err
}

// loadInterp compiles the interpreter once per process (per cache directory, engine and precompiled directory).
func loadInterp(ctx context.Context, c Config) (*interp, error) {
	var pre *precompiledDir
	var src *source
	var err error
	if c.PrecompiledDir != "" {
		if pre, err = openPrecompiledOnce(c.PrecompiledDir, c.Engine); err != nil {
			return nil, err
		}
	}
	if c.Interpreter == nil {
		src, err = embeddedSource(c.CacheDir, c.CacheMaxBytes, pre)
	} else if c.runtime != "" {
		src, err = runtimeSource(c.runtime, c.Interpreter)
	} else {
		src, err = customSource(c.Interpreter)
	}
	if err != nil {
		return nil, err
	}
	if pre != nil {
		if err := pre.matches(src); err != nil {
			return nil, err
		}
	}
	starttrace.Mark("interp: identify artifacts")
	key := interpKey{content: src.key(), cacheDir: c.CacheDir, engine: c.Engine, precompiled: c.PrecompiledDir}
	interpMu.Lock()
	e, ok := interpCache[key]
	if !ok {
		e = &interpEntry{}
		interpCache[key] = e
	}
	interpMu.Unlock()
	e.once.Do(func() { e.it, e.err = compileInterp(context.WithoutCancel(ctx), src, c, pre) })
	return e.it, e.err
}

func compileInterp(ctx context.Context, src *source, c Config, pre *precompiledDir) (*interp, error) {
	cacheDir := c.CacheDir
	if cacheDir != "" {
		if err := os.MkdirAll(cacheDir, 0o700); err != nil {
			cacheDir = "" // an unusable cache directory only costs time
		}
	}
	// A caller's zips first: a broken artifact fails before seconds of compilation. The embedded ones, checked
	// against SHA256SUMS, are indexed when the guest first opens a file in them (a run from a saved snapshot
	// may never).
	var stdlib, tz fs.FS
	if src.gzSHA != "" {
		stdlib, tz = lazyZipFS(src.stdlib, "stdlib.zip"), lazyZipFS(src.tzdata, "tzdata.zip")
	} else {
		var err error
		if stdlib, err = zipFS(src.stdlib); err != nil {
			return nil, fmt.Errorf("%w: stdlib.zip: %w", ErrInterpreter, err)
		}
		if tz, err = zipFS(src.tzdata); err != nil {
			return nil, fmt.Errorf("%w: tzdata.zip: %w", ErrInterpreter, err)
		}
		starttrace.Mark("interp: open stdlib and tzdata zips")
	}
	it := &interp{root: rootFS, stdlib: stdlib, zoneinfo: tz, sha256: src.declaredSHA, info: src.info,
		codeID: src.codeID, dataID: src.dataID, wasmFn: src.wasm, engine: c.Engine, cacheDir: cacheDir,
		maxBytes: c.CacheMaxBytes, precompiled: pre}
	// The exports are checked on the decoded module: compiling it waits until an interpreter must be initialised
	// (a snapshot saved by an earlier process makes that unnecessary).
	if !src.exportsChecked {
		wasm, err := it.wasmBytes()
		if err != nil {
			return nil, err
		}
		if err := checkExports(wasm); err != nil {
			return nil, err
		}
		starttrace.Mark("interp: decode wasm, check exports")
	}
	codeDir := cacheDir
	if pre != nil {
		codeDir = pre.dir // read-only: every module it needs is there (openPrecompiled checked)
	}
	eng, err := newEngine(ctx, c.Engine, codeDir)
	if err != nil {
		return nil, err
	}
	it.eng = eng
	starttrace.Mark("interp: new engine (runtime, WASI, host module)")
	return it, nil
}

func checkExports(wasm []byte) error {
	m, err := wasmbin.Decode(wasm)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInterpreter, err)
	}
	for _, n := range []string{hostfuncs.ExportInitialize, hostfuncs.ExportABIVersion, hostfuncs.ExportInit,
		hostfuncs.ExportPrepare, hostfuncs.ExportExec, hostfuncs.ExportAlloc, hostfuncs.ExportFree, hostfuncs.ExportInterrupt} {
		if e, ok := m.Export(n); !ok || e.Kind != wasmbin.KindFunc {
			return fmt.Errorf("%w: the interpreter does not export the function %s", ErrInterpreter, n)
		}
	}
	return nil
}

// original compiles the interpreter as built (with its data segments), once: the module every snapshot is
// initialised from.
func (it *interp) original(ctx context.Context) (engine.Module, error) {
	it.origOnce.Do(func() {
		wasm, err := it.wasmBytes()
		if err != nil {
			it.origErr = err
			return
		}
		it.mod, it.origErr = it.compile(context.WithoutCancel(ctx), wasm, "interpreter") // shared by later callers: never cancelled by this one
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

// lazyZipFS is a zip's file system, indexed on first use; an archive that cannot be read makes every Open fail
// with an error naming it.
func lazyZipFS(b []byte, name string) fs.FS {
	return &lazyFS{open: sync.OnceValues(func() (fs.FS, error) {
		f, err := zipFS(b)
		starttrace.Mark("interp: index " + name + " (first use)")
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInterpreter, name, err)
		}
		return f, nil
	})}
}

type lazyFS struct{ open func() (fs.FS, error) }

func (l *lazyFS) Open(name string) (fs.File, error) {
	f, err := l.open()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f.Open(name)
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

// onCompileKey carries Config.OnCompile to the compilations New causes (the interp is shared by Sandboxes).
type onCompileKey struct{}

// compile compiles a module through the engine's cache.
func (it *interp) compile(ctx context.Context, wasm []byte, what string) (engine.Module, error) {
	return it.compileID(ctx, wasm, nil, what)
}

// compileID compiles a module through the engine's cache; id is wazero's ID of the module when the caller knows
// it (nil: the module is hashed to find out whether the cache holds it). With a precompiled directory, the
// module's code must be in it (checked first); otherwise a compilation the cache cannot answer is reported to
// OnCompile and followed by the cache's size cap, and a hit marks the code file as used. The module may be a
// mapped file: a fault while wazero reads it is an error, not a crash.
func (it *interp) compileID(ctx context.Context, wasm []byte, id *[sha256.Size]byte, what string) (engine.Module, error) {
	wazero := it.engine == "" || it.engine == "wazero"
	compile := func() (mod engine.Module, err error) {
		err = engine.ReadGuard(func() error {
			mod, err = it.eng.Compile(ctx, wasm)
			return err
		})
		return mod, err
	}
	codeFile := func(dir string) (string, error) {
		if id != nil {
			return engine.WazeroCodeFileForID(dir, *id), nil
		}
		var f string
		err := engine.ReadGuard(func() error { f = engine.WazeroCodeFile(dir, wasm); return nil })
		return f, err
	}
	switch {
	case it.precompiled != nil:
		f, err := codeFile(it.precompiled.dir)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(it.precompiled.dir, f)
		if err == nil {
			_, err = it.precompiled.file(rel)
		}
		if errors.Is(err, fs.ErrNotExist) && it.precompiled.info.SnapshotOnly {
			return nil, it.precompiled.refuse("it was made for one configuration only (PrecompileSnapshotOnly, precompile --snapshot-only), and this Sandbox's differs (its Preload, Tools, Packages or Deterministic settings): it would have to compile the %s", what)
		} else if errors.Is(err, fs.ErrNotExist) {
			return nil, it.precompiled.refuse("it holds no compiled code for the %s of this build", what)
		} else if err != nil {
			return nil, err
		}
		starttrace.Mark("precompiled: checksum the compiled code (first use)")
		return compile()
	case !wazero: // another engine's cache is its own affair
		return compile()
	case it.cacheDir != "" && id != nil:
		f, _ := codeFile(it.cacheDir)
		if _, err := os.Stat(f); err == nil {
			mod, err := compile()
			touch(f)
			return mod, err
		}
		return it.compileMiss(ctx, compile, what)
	case it.cacheDir != "":
		// The compile starts at once; whether the cache holds it (hashing the module again to name its file)
		// is found out beside it, so a hit costs no extra time on a second core.
		type result struct {
			mod engine.Module
			err error
		}
		done := make(chan result, 1)
		go func() {
			m, err := compile()
			done <- result{m, err}
		}()
		f, err := codeFile(it.cacheDir)
		if _, serr := os.Stat(f); err == nil && serr == nil {
			r := <-done
			touch(f)
			return r.mod, r.err
		}
		return it.compileMiss(ctx, func() (engine.Module, error) { r := <-done; return r.mod, r.err }, what)
	}
	notify, _ := ctx.Value(onCompileKey{}).(func(CompileEvent))
	if notify != nil {
		notify(CompileEvent{Module: what})
	}
	start := time.Now()
	mod, err := compile()
	if notify != nil {
		notify(CompileEvent{Module: what, Done: true, Elapsed: time.Since(start), Err: err})
	}
	return mod, err
}

// compileMiss waits for a compilation the cache does not hold, reporting it to OnCompile, and then applies the
// cache's size cap.
func (it *interp) compileMiss(ctx context.Context, wait func() (engine.Module, error), what string) (engine.Module, error) {
	start := time.Now()
	notify, _ := ctx.Value(onCompileKey{}).(func(CompileEvent))
	if notify != nil {
		notify(CompileEvent{Module: what})
	}
	mod, err := wait()
	if notify != nil {
		notify(CompileEvent{Module: what, Done: true, Elapsed: time.Since(start), Err: err})
	}
	if err == nil {
		enforceCacheCap(it.cacheDir, it.maxBytes, cacheMinAge)
	}
	return mod, err
}
