package wasmbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
)

// A precompiled directory (Precompile, `wasmbox precompile DIR`) holds what a process needs to run its first
// program without compiling or initialising anything: the interpreter's compiled code (as wazero's compilation
// cache lays it out), the snapshot module and the saved snapshot of the configuration it was made with, and
// precompiled.json, which names the wasmbox format and ABI, the wazero version, GOOS, GOARCH and CPU features,
// the interpreter, and every file with its size and CRC-32C. New refuses (ErrPrecompiled) a directory whose
// manifest does not match this binary and machine, and a file whose size or checksum differs when it is first
// used. The checksums catch damage and mix-ups (a partial copy, files of another build); they are not a
// signature: the directory holds native code and must be as trusted as the binary (read-only, owned by whoever
// deploys it).
const (
	precompiledFormat   = "wasmbox-precompiled-v1"
	precompiledManifest = "precompiled.json"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type precompiledFile struct {
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

type precompiledInfo struct {
	Format     string `json:"format"`
	ABIVersion int    `json:"abi_version"`
	Engine     string `json:"engine"`
	Wazero     string `json:"wazero"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	CPU        uint64 `json:"cpu_features"`
	GzSHA256   string `json:"python_wasm_gz_sha256,omitempty"`
	CodeID     string `json:"interpreter_sha256"`
	DataID     string `json:"data_id"`
	// SnapshotOnly: the directory holds no compiled interpreter to initialise other configurations with.
	SnapshotOnly bool                       `json:"snapshot_only,omitempty"`
	Files        map[string]precompiledFile `json:"files"`
}

type precompiledDir struct {
	dir  string
	info precompiledInfo
	mu   sync.Mutex
	ok   map[string]bool // files verified in this process
}

func (p *precompiledDir) refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrPrecompiled, p.dir, fmt.Sprintf(format, a...))
}

var precompiledDirs sync.Map // dir + engine → *precompiledOnce

type precompiledOnce struct {
	once sync.Once
	p    *precompiledDir
	err  error
}

// openPrecompiledOnce opens dir once per process.
func openPrecompiledOnce(dir, engineName string) (*precompiledDir, error) {
	v, _ := precompiledDirs.LoadOrStore(dir+"\x00"+engineName, &precompiledOnce{})
	o := v.(*precompiledOnce)
	o.once.Do(func() { o.p, o.err = openPrecompiled(dir, engineName) })
	return o.p, o.err
}

// openPrecompiled reads and checks a precompiled directory's manifest against this binary and machine, and the
// sizes of its files.
func openPrecompiled(dir, engineName string) (*precompiledDir, error) {
	p := &precompiledDir{dir: dir, ok: map[string]bool{}}
	b, err := engine.ReadSmallFile(filepath.Join(dir, precompiledManifest), maxManifestBytes)
	if err != nil {
		return nil, p.refuse("%v (make it with wasmbox precompile)", err)
	}
	i := &p.info
	if err := json.Unmarshal(b, i); err != nil {
		return nil, p.refuse("%s: %v", precompiledManifest, err)
	}
	if engineName == "" {
		engineName = "wazero"
	}
	for _, c := range []struct{ what, have, want string }{
		{"format", i.Format, precompiledFormat},
		{"ABI version", fmt.Sprint(i.ABIVersion), fmt.Sprint(hostfuncs.ABIVersion)},
		{"engine", i.Engine, engineName},
		{"wazero version", i.Wazero, engine.WazeroVersion()},
		{"GOOS", i.GOOS, runtime.GOOS},
		{"GOARCH", i.GOARCH, runtime.GOARCH},
		{"CPU features", fmt.Sprint(i.CPU), fmt.Sprint(engine.WazeroCPUFeatures())},
	} {
		if c.have != c.want {
			return nil, p.refuse("made for %s %q, this binary needs %q: make it again with this binary, on this kind of machine", c.what, c.have, c.want)
		}
	}
	for rel, f := range i.Files {
		if !filepath.IsLocal(rel) {
			return nil, p.refuse("file %q is outside the directory", rel)
		}
		fi, err := os.Stat(filepath.Join(dir, rel))
		if err != nil {
			return nil, p.refuse("%v", err)
		}
		if fi.Size() != f.Size {
			return nil, p.refuse("%s has %d bytes, the manifest says %d", rel, fi.Size(), f.Size)
		}
	}
	return p, nil
}

// matches checks that the directory was made for this interpreter.
func (p *precompiledDir) matches(src *source) error {
	if p.info.GzSHA256 != src.gzSHA || p.info.CodeID != src.codeID || p.info.DataID != src.dataID {
		return p.refuse("made for another interpreter (%.12s, this one is %.12s)", p.info.CodeID, src.codeID)
	}
	return nil
}

// file returns the path of rel after checking its size and checksum against the manifest (once per process);
// fs.ErrNotExist if the manifest does not list it.
func (p *precompiledDir) file(rel string) (string, error) {
	rel = filepath.ToSlash(rel)
	f, listed := p.info.Files[rel]
	if !listed {
		return "", fs.ErrNotExist
	}
	path := filepath.Join(p.dir, filepath.FromSlash(rel))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ok[rel] {
		return path, nil
	}
	got, err := fileSum(path)
	if err != nil {
		return "", p.refuse("%v", err)
	}
	if got != f {
		return "", p.refuse("%s changed since it was made (%d bytes, crc32c %08x; the manifest says %d, %08x)", rel, got.Size, got.CRC32C, f.Size, f.CRC32C)
	}
	p.ok[rel] = true
	return path, nil
}

// mapFile maps rel after checking its size and checksum against the manifest (once per process);
// fs.ErrNotExist if the manifest does not list it. The checksum is computed over the mapping that is returned,
// so the bytes used are the bytes checked.
func (p *precompiledDir) mapFile(rel string) (*engine.MappedFile, error) {
	rel = filepath.ToSlash(rel)
	f, listed := p.info.Files[rel]
	if !listed {
		return nil, fs.ErrNotExist
	}
	m, err := engine.MapFile(filepath.Join(p.dir, filepath.FromSlash(rel)))
	if err != nil {
		return nil, p.refuse("%v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ok[rel] && int64(len(m.Bytes)) == f.Size {
		return m, nil
	}
	var got precompiledFile
	err = engine.ReadGuard(func() error {
		got = precompiledFile{Size: int64(len(m.Bytes)), CRC32C: crc32.Checksum(m.Bytes, castagnoli)}
		return nil
	})
	if err == nil && got != f {
		err = fmt.Errorf("%s changed since it was made (%d bytes, crc32c %08x; the manifest says %d, %08x)", rel, got.Size, got.CRC32C, f.Size, f.CRC32C)
	}
	if err != nil {
		_ = m.Close()
		return nil, p.refuse("%v", err)
	}
	p.ok[rel] = true
	return m, nil
}

// fileSum is the size and CRC-32C of a file, computed over a read-only mapping of it (no copy).
func fileSum(path string) (precompiledFile, error) {
	m, err := engine.MapFile(path)
	if err != nil {
		return precompiledFile{}, err
	}
	defer m.Close()
	var s precompiledFile
	err = engine.ReadGuard(func() error {
		s = precompiledFile{Size: int64(len(m.Bytes)), CRC32C: crc32.Checksum(m.Bytes, castagnoli)}
		return nil
	})
	return s, err
}

// Precompile bakes into dir everything a process needs to start sandboxes configured like cfg without compiling or
// initialising: the compiled interpreter, the snapshot module and the snapshot of cfg's configuration (its
// Preload, Tools, Packages, Deterministic settings). Run it at build time (a container image, a serverless layer)
// with the same binary and on the same kind of machine that will run it, then set Config.PrecompiledDir. dir must
// not exist or be empty. It takes as long as the first compile (tens of seconds); the result is about 120 MB.
//
// Sandboxes configured otherwise can use the directory too: they skip the compile and initialise once per
// process (their snapshot is saved in CacheDir as usual). PrecompileSnapshotOnly makes a directory without that
// possibility, about 45 MB smaller.
func Precompile(ctx context.Context, dir string, cfg Config) error {
	return precompile(ctx, dir, cfg, false)
}

// PrecompileSnapshotOnly is Precompile without the compiled interpreter that initialises other configurations
// (about 75 MB instead of 120): a process that uses the directory starts sandboxes configured like cfg only, and
// New refuses any other configuration with ErrPrecompiled (it would have to compile for tens of seconds). A
// process starting from the directory loads the same files either way.
func PrecompileSnapshotOnly(ctx context.Context, dir string, cfg Config) error {
	return precompile(ctx, dir, cfg, true)
}

func precompile(ctx context.Context, dir string, cfg Config, snapshotOnly bool) error {
	if dir == "" {
		return fmt.Errorf("%w: Precompile needs a directory", ErrInvalidConfig)
	}
	if des, err := os.ReadDir(dir); err == nil && len(des) > 0 {
		return fmt.Errorf("%w: Precompile: %s is not empty", ErrInvalidConfig, dir)
	}
	if cfg.Engine != "" && cfg.Engine != "wazero" {
		return fmt.Errorf("%w: Precompile supports the wazero engine only", ErrInvalidConfig)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("wasmbox: Precompile: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("wasmbox: Precompile: %w", err)
	}
	cfg.CacheDir, cfg.DisableCompileCache, cfg.PrecompiledDir, cfg.CacheMaxBytes = abs, false, "", -1
	sb, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	defer sb.Close(ctx)
	if _, err := sb.it.original(ctx); err != nil { // other configurations initialise from it
		return err
	}
	if snapshotOnly {
		wasm, err := sb.it.wasmBytes()
		if err != nil {
			return err
		}
		if err := os.Remove(engine.WazeroCodeFile(abs, wasm)); err != nil {
			return fmt.Errorf("wasmbox: Precompile: the compiled interpreter: %w", err)
		}
	}
	info := precompiledInfo{Format: precompiledFormat, ABIVersion: int(hostfuncs.ABIVersion), Engine: "wazero",
		Wazero: engine.WazeroVersion(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPU: engine.WazeroCPUFeatures(),
		CodeID: sb.it.codeID, DataID: sb.it.dataID, SnapshotOnly: snapshotOnly, Files: map[string]precompiledFile{}}
	if cfg.Interpreter == nil {
		v, err := assets.LoadVerified()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInterpreter, err)
		}
		info.GzSHA256 = v.WasmGzSHA256
	}
	// The artifact cache records inodes, which do not survive a copy: the manifest carries its facts instead.
	if err := os.RemoveAll(filepath.Join(abs, "artifacts")); err != nil {
		return fmt.Errorf("wasmbox: Precompile: %w", err)
	}
	err = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(abs, path)
		if strings.HasPrefix(d.Name(), ".tmp-") || strings.HasSuffix(d.Name(), ".tmp") {
			return os.Remove(path)
		}
		if err := os.Chmod(path, 0o644); err != nil { // readable by the (often different) user that runs it
			return err
		}
		s, err := fileSum(path)
		info.Files[filepath.ToSlash(rel)] = s
		return err
	})
	if err == nil {
		err = chmodDirs(abs)
	}
	if err != nil {
		return fmt.Errorf("wasmbox: Precompile: %w", err)
	}
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := engine.WriteFileAtomic(filepath.Join(abs, precompiledManifest), append(b, '\n')); err != nil {
		return fmt.Errorf("wasmbox: Precompile: %w", err)
	}
	return os.Chmod(filepath.Join(abs, precompiledManifest), 0o644)
}

func chmodDirs(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return err
	})
	sort.Strings(dirs)
	for _, d := range dirs {
		err = errors.Join(err, os.Chmod(d, 0o755))
	}
	return err
}
