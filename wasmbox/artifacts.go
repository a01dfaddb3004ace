package wasmbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/internal/engine"
)

// The embedded interpreter is decompressed once, into the cache: <CacheDir>/artifacts/<sha256 of python.wasm.gz>
// holds python.wasm (.wasm) and a manifest (.json) recording the decompressed wasm's SHA-256, that its exports were
// checked, and the identity of the .wasm file as written and verified (device, inode, size, modification and
// change times). The key is the SHA-256 of the compressed bytes, verified against SHA256SUMS in this process; the
// entry is used only while its file's identity is still the one recorded, so a truncated, replaced or rewritten
// file is noticed and the entry rebuilt. A process that starts from a saved snapshot then never decompresses or
// hashes the interpreter. The manifest itself is trusted like the compiled native code next to it: whoever can
// write CacheDir can change what runs, so CacheDir must be private to the user (it is created 0700).
const artifactFormat = "wasmbox-artifact-v1"

type artifactManifest struct {
	Format         string       `json:"format"`
	GzSHA256       string       `json:"gz_sha256"`
	WasmSHA256     string       `json:"wasm_sha256"`
	ExportsChecked bool         `json:"exports_checked"`
	File           fileIdentity `json:"file"`
}

var embeddedSources sync.Map // cache dir and precompiled dir → *embeddedResult

type embeddedResult struct {
	once sync.Once
	src  *source
	err  error
}

// embeddedSource returns the embedded interpreter, from the artifact cache under cacheDir when a verified entry
// is there (once per process and cache directory).
// With a precompiled directory made for this interpreter, its manifest vouches for the decompressed wasm's hash
// instead.
func embeddedSource(cacheDir string, maxBytes int64, pre *precompiledDir) (*source, error) {
	key := cacheDir
	if pre != nil {
		key += "\x00" + pre.dir
	}
	r, _ := embeddedSources.LoadOrStore(key, &embeddedResult{})
	e := r.(*embeddedResult)
	e.once.Do(func() { e.src, e.err = loadEmbedded(cacheDir, maxBytes, pre) })
	return e.src, e.err
}

func loadEmbedded(cacheDir string, maxBytes int64, pre *precompiledDir) (*source, error) {
	dir := ""
	if cacheDir != "" {
		dir = filepath.Join(cacheDir, "artifacts")
	}
	v, err := loadAssets(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInterpreter, err)
	}
	src := &source{stdlib: v.Stdlib, tzdata: v.TZData, info: v.BuildInfo, gzSHA: v.WasmGzSHA256,
		dataID: "embedded " + v.StdlibSHA256 + " " + v.TZDataSHA256}
	if pre != nil && pre.info.GzSHA256 == v.WasmGzSHA256 && len(pre.info.CodeID) == 64 {
		m := &artifactManifest{GzSHA256: v.WasmGzSHA256, WasmSHA256: pre.info.CodeID}
		if c, ok := readArtifact(dir, v.WasmGzSHA256); ok && c.WasmSHA256 == m.WasmSHA256 {
			m = c
		}
		src.declaredSHA, src.codeID, src.exportsChecked = m.WasmSHA256, m.WasmSHA256, true
		src.wasm = func() ([]byte, error) {
			b, err := artifactWasm(dir, m, v)
			if err != nil {
				err = pre.refuse("%v", err)
			}
			return b, err
		}
		return src, nil
	}
	if m, ok := readArtifact(dir, v.WasmGzSHA256); ok {
		src.declaredSHA, src.codeID, src.exportsChecked = m.WasmSHA256, m.WasmSHA256, m.ExportsChecked
		src.wasm = func() ([]byte, error) { return artifactWasm(dir, m, v) }
		return src, nil
	}
	wasm, sha, err := v.Decompress()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInterpreter, err)
	}
	if err := checkExports(wasm); err != nil {
		return nil, err
	}
	src.declaredSHA, src.codeID, src.exportsChecked = sha, sha, true
	src.wasm = func() ([]byte, error) { return wasm, nil }
	if dir != "" && writeArtifact(dir, v.WasmGzSHA256, wasm, sha) == nil {
		enforceCacheCap(cacheDir, maxBytes, cacheMinAge)
	}
	return src, nil
}

// The embedded artifacts are part of the executable file, so checking them against SHA256SUMS in every process
// (a pass of SHA-256 over 15 MB) proves nothing new while that file is the same: the cache keeps, per
// executable, a record <CacheDir>/artifacts/exe-<key>.json that this executable's files were checked, with the
// executable file's identity (device, inode, size, modification and change times) and the hash of its
// SHA256SUMS. A process whose executable has that identity takes the hashes SHA256SUMS declares; a rebuilt,
// replaced or modified executable no longer matches and is checked again. Like the artifact entries, this is
// against accidents, not attackers (whoever can write the cache can change the native code in it); where the
// system gives no inode and change time, every process checks.
const exeRecordFormat = "wasmbox-exe-checked-v1"

type exeRecord struct {
	Format     string       `json:"format"`
	SHA256SUMS string       `json:"sha256sums_sha256"`
	Exe        fileIdentity `json:"executable"`
}

// executableIdentity is the identity of the running executable's file; ok is false when it cannot be known
// well enough: no inode or change time, or (on Linux) the file the process runs is not the file at the path it
// was started from (replaced since, or run through a loader such as valgrind). A variable for tests.
var executableIdentity = func() (fileIdentity, bool) {
	p, err := os.Executable()
	if err != nil {
		return fileIdentity{}, false
	}
	fi, err := os.Stat(p)
	if err != nil {
		return fileIdentity{}, false
	}
	id := identityOf(fi)
	if runtime.GOOS == "linux" {
		running, err := os.Stat("/proc/self/exe") // the mapped file itself, even if renamed or unlinked since
		if err != nil || identityOf(running) != id {
			return fileIdentity{}, false
		}
	}
	return id, id.Ino != 0 && id.CtimeNs != 0
}

// exeRecordPath names the record of this executable and SHA256SUMS in dir ("" if there is none to keep).
func exeRecordPath(dir string) (string, exeRecord) {
	if dir == "" {
		return "", exeRecord{}
	}
	id, ok := executableIdentity()
	if !ok {
		return "", exeRecord{}
	}
	sums := sha256.Sum256(assets.SHA256SUMS())
	rec := exeRecord{Format: exeRecordFormat, SHA256SUMS: hex.EncodeToString(sums[:]), Exe: id}
	b, _ := json.Marshal(rec)
	key := sha256.Sum256(b)
	return filepath.Join(dir, "exe-"+hex.EncodeToString(key[:16])+".json"), rec
}

// loadAssets returns the embedded artifacts: checked against SHA256SUMS, unless the artifact cache in dir
// records that this executable's were.
func loadAssets(dir string) (*assets.Verified, error) {
	path, rec := exeRecordPath(dir)
	if path != "" {
		if b, err := engine.ReadSmallFile(path, maxRecordBytes); err == nil {
			var got exeRecord
			if json.Unmarshal(b, &got) == nil && got == rec {
				touch(path)
				return assets.LoadDeclared()
			}
		}
	}
	v, err := assets.LoadVerified()
	if err == nil && path != "" && os.MkdirAll(dir, 0o700) == nil {
		b, _ := json.Marshal(rec)
		_ = engine.WriteFileAtomic(path, b)
	}
	return v, err
}

// maxRecordBytes bounds a small cache record (the executable's record, an artifact manifest, a module id, a
// snapshot's stack pointer); maxManifestBytes a precompiled directory's manifest. A record past its bound, or
// one that is not a regular file, is treated as missing: rebuilt, never read on.
const (
	maxRecordBytes   = 64 << 10
	maxManifestBytes = 4 << 20
)

func artifactPaths(dir, gz string) (wasm, manifest string) {
	return filepath.Join(dir, gz+".wasm"), filepath.Join(dir, gz+".json")
}

// readArtifact returns the verified entry for the compressed interpreter gz, if its file is still the one written.
func readArtifact(dir, gz string) (*artifactManifest, bool) {
	if dir == "" {
		return nil, false
	}
	wp, mp := artifactPaths(dir, gz)
	b, err := engine.ReadSmallFile(mp, maxRecordBytes)
	if err != nil {
		return nil, false
	}
	var m artifactManifest
	if json.Unmarshal(b, &m) != nil || m.Format != artifactFormat || m.GzSHA256 != gz || len(m.WasmSHA256) != 64 {
		return nil, false
	}
	fi, err := os.Stat(wp)
	if err != nil || identityOf(fi) != m.File {
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(mp, now, now) // last use, for the size cap (the .wasm's own times are part of its identity)
	return &m, true
}

// artifactWasm reads the cached wasm, checking that the file opened is still the verified one; otherwise it
// decompresses the embedded interpreter again (and checks it is the one the manifest names).
func artifactWasm(dir string, m *artifactManifest, v *assets.Verified) ([]byte, error) {
	wp, _ := artifactPaths(dir, m.GzSHA256)
	if dir == "" || m.Format == "" { // no verified entry: nothing to read
	} else if f, err := engine.OpenRead(wp); err == nil {
		defer f.Close()
		if fi, err := f.Stat(); err == nil && identityOf(fi) == m.File {
			b := make([]byte, fi.Size())
			if _, err := readFull(f, b); err == nil {
				return b, nil
			}
		}
	}
	wasm, sha, err := v.Decompress()
	if err != nil {
		return nil, err
	}
	if sha != m.WasmSHA256 {
		return nil, fmt.Errorf("wasmbox: the artifact cache entry %s names another interpreter (%s, decompressed %s)", wp, m.WasmSHA256, sha)
	}
	if dir != "" {
		_ = writeArtifact(dir, m.GzSHA256, wasm, sha)
	}
	return wasm, nil
}

func readFull(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := f.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// writeArtifact writes a verified entry: the wasm under a temporary name, renamed into place, then the manifest
// with the identity of the file as it now is.
func writeArtifact(dir, gz string, wasm []byte, sha string) error {
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) != sha {
		return fmt.Errorf("wasmbox: artifact %s does not match its hash", gz)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	wp, mp := artifactPaths(dir, gz)
	if err := engine.WriteFileAtomic(wp, wasm); err != nil {
		return err
	}
	fi, err := os.Stat(wp)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(artifactManifest{Format: artifactFormat, GzSHA256: gz, WasmSHA256: sha, ExportsChecked: true,
		File: identityOf(fi)})
	return engine.WriteFileAtomic(mp, b)
}
