package wasmbox

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/internal/starttrace"
)

// loadTraced loads the embedded interpreter's source through the artifact cache in dir (not memoised) and
// reports whether it decompressed the embedded wasm.
func loadTraced(t *testing.T, dir string) (*source, bool) {
	t.Helper()
	starttrace.Enable()
	src, err := loadEmbedded(dir, -1, nil)
	phases := starttrace.Take()
	if err != nil {
		t.Fatal(err)
	}
	return src, slices.ContainsFunc(phases, func(p starttrace.Phase) bool { return p.Name == "assets: gunzip python.wasm" })
}

// The embedded interpreter is decompressed once into the cache; later loads trust the verified entry while its
// file is the one written, and a damaged entry is noticed and rebuilt.
func TestArtifactCache(t *testing.T) {
	want, err := assets.Load()
	if err != nil {
		t.Fatal(err)
	}
	v, err := assets.LoadVerified()
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	dir := filepath.Join(cache, "artifacts")
	wasmPath, manifestPath := artifactPaths(dir, v.WasmGzSHA256)
	check := func(name string, wantGunzip bool) {
		t.Helper()
		src, gunzipped := loadTraced(t, cache)
		if gunzipped != wantGunzip {
			t.Errorf("%s: decompressed %v, want %v", name, gunzipped, wantGunzip)
		}
		if src.codeID != want.WasmSHA256 || !src.exportsChecked {
			t.Errorf("%s: code id %s, exports checked %v", name, src.codeID, src.exportsChecked)
		}
		wasm, err := src.wasm()
		if err != nil || !bytes.Equal(wasm, want.Wasm) {
			t.Errorf("%s: the wasm differs from the embedded one (err %v)", name, err)
		}
		if b, err := os.ReadFile(wasmPath); err != nil || !bytes.Equal(b, want.Wasm) {
			t.Errorf("%s: the cached file differs from the embedded wasm (err %v)", name, err)
		}
	}
	check("first load", true)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("artifacts directory: %v, %v (want 0700)", fi.Mode(), err)
	}
	check("verified entry", false)

	// Rewritten in place, same size: the change time moves, so the entry no longer proves anything.
	b, _ := os.ReadFile(wasmPath)
	b[len(b)/2] ^= 0xff
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(wasmPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	check("rewritten in place", true)
	check("rebuilt entry", false)

	// Truncated.
	if err := os.Truncate(wasmPath, 100); err != nil {
		t.Fatal(err)
	}
	check("truncated", true)

	// Replaced by another file through a rename (new inode).
	tmp := wasmPath + ".other"
	if err := os.WriteFile(tmp, want.Wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, wasmPath); err != nil {
		t.Fatal(err)
	}
	check("replaced", true)

	// An unreadable manifest.
	if err := os.WriteFile(manifestPath, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("broken manifest", true)
	check("after the broken manifest", false)

	// The file changes after the entry was checked but before the wasm is read: it is decompressed again.
	src, _ := loadTraced(t, cache)
	if err := os.Truncate(wasmPath, 10); err != nil {
		t.Fatal(err)
	}
	if wasm, err := src.wasm(); err != nil || !bytes.Equal(wasm, want.Wasm) {
		t.Errorf("changed before reading: the wasm differs (err %v)", err)
	}
}

// cacheFile writes a file of size bytes last used age ago.
func cacheFile(t *testing.T, path string, size int, age time.Duration) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	when := time.Now().Add(-age)
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// The cap evicts whole entries, least recently used first, and keeps entries used within the protection window.
func TestCacheCap(t *testing.T) {
	root := t.TempDir()
	code := filepath.Join(root, "wazero-v1.12.0-amd64-linux")
	snaps := filepath.Join(root, "snapshots")
	arts := filepath.Join(root, "artifacts")
	cacheFile(t, filepath.Join(code, "aaaa"), 4000, 5*time.Hour)     // oldest: evicted
	cacheFile(t, filepath.Join(snaps, "k1.img"), 3000, 4*time.Hour)  // evicted with its .sp
	cacheFile(t, filepath.Join(snaps, "k1.sp"), 10, 3*time.Hour)     // (the entry's last use is its newest file)
	cacheFile(t, filepath.Join(arts, "g.wasm"), 2000, 6*time.Hour)   // its .json was used recently: kept
	cacheFile(t, filepath.Join(arts, "g.json"), 100, 30*time.Minute) //
	cacheFile(t, filepath.Join(code, "bbbb"), 2500, 2*time.Hour)     // fits once the two oldest are gone
	cacheFile(t, filepath.Join(snaps, "k2.img"), 3000, time.Minute)  // in the protection window
	cacheFile(t, filepath.Join(snaps, "k2.sp"), 10, time.Minute)
	cacheFile(t, filepath.Join(snaps, ".tmp-123"), 50, 2*time.Hour) // a crashed writer's leftover: removed
	cacheFile(t, filepath.Join(snaps, ".tmp-456"), 50, time.Minute) // a writer at work: kept

	enforceCacheCap(root, 8000, 10*time.Minute)
	for path, want := range map[string]bool{
		filepath.Join(code, "aaaa"): false, filepath.Join(snaps, "k1.img"): false, filepath.Join(snaps, "k1.sp"): false,
		filepath.Join(arts, "g.wasm"): true, filepath.Join(arts, "g.json"): true, filepath.Join(code, "bbbb"): true,
		filepath.Join(snaps, "k2.img"): true, filepath.Join(snaps, "k2.sp"): true,
		filepath.Join(snaps, ".tmp-123"): false, filepath.Join(snaps, ".tmp-456"): true,
	} {
		if exists(path) != want {
			t.Errorf("%s: exists %v, want %v", path, !want, want)
		}
	}
	if _, total := scanCache(root); total > 8000 {
		t.Errorf("the cache holds %d bytes, cap 8000", total)
	}

	// Past the cap, entries in the protection window stay; the rest go.
	enforceCacheCap(root, 1, 10*time.Minute)
	if exists(filepath.Join(code, "bbbb")) || exists(filepath.Join(arts, "g.wasm")) || !exists(filepath.Join(snaps, "k2.img")) {
		t.Error("a tiny cap should remove every entry older than the window and keep the rest")
	}
	// No cap.
	cacheFile(t, filepath.Join(code, "cccc"), 5000, 5*time.Hour)
	enforceCacheCap(root, -1, 0)
	if !exists(filepath.Join(code, "cccc")) {
		t.Error("a negative cap removed an entry")
	}
}

// The embedded artifacts are hashed once per executable file: a later process of the same executable takes the
// hashes SHA256SUMS declares, and another executable (or a damaged or foreign record) is checked again.
func TestExecutableRecord(t *testing.T) {
	saved := executableIdentity
	defer func() { executableIdentity = saved }()
	exe := fileIdentity{Dev: 1, Ino: 42, Size: 1 << 20, MtimeNs: 1, CtimeNs: 2}
	known := true
	executableIdentity = func() (fileIdentity, bool) { return exe, known }
	dir := filepath.Join(t.TempDir(), "artifacts")
	hashed := func(name string, want bool) {
		t.Helper()
		starttrace.Enable()
		v, err := loadAssets(dir)
		phases := starttrace.Take()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// LoadVerified hashes once per process and remembers; LoadDeclared marks every call.
		got := !slices.ContainsFunc(phases, func(p starttrace.Phase) bool {
			return p.Name == "assets: embedded, checked by an earlier run of this executable"
		})
		if got != want {
			t.Errorf("%s: hashed %v, want %v", name, got, want)
		}
		ref, err := assets.LoadVerified()
		if err != nil {
			t.Fatal(err)
		}
		if v.WasmGzSHA256 != ref.WasmGzSHA256 || v.StdlibSHA256 != ref.StdlibSHA256 || v.TZDataSHA256 != ref.TZDataSHA256 ||
			!bytes.Equal(v.WasmGz, ref.WasmGz) {
			t.Errorf("%s: the artifacts differ from the verified ones", name)
		}
	}
	hashed("first process", true)
	hashed("same executable", false)
	path, _ := exeRecordPath(dir)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record %s: %v", path, err)
	}

	exe.CtimeNs++ // modified in place
	hashed("changed executable", true)
	hashed("changed executable, recorded", false)
	exe.Ino++ // replaced
	hashed("replaced executable", true)

	path, _ = exeRecordPath(dir)
	for name, content := range map[string]string{
		"broken record":  "{",
		"foreign record": `{"format":"wasmbox-exe-checked-v1","sha256sums_sha256":"00","executable":{}}`,
		"empty record":   "",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		hashed(name, true)
	}

	known = false // no inode or change time: every process checks
	hashed("unknown identity", true)
	hashed("unknown identity again", true)
	known = true
	saved2 := dir
	dir = ""
	hashed("no cache", true)
	dir = saved2
}

// The embedded zips are indexed on first use: the same files as an index built at once, and an archive that
// cannot be read is an error naming it on every Open, never an empty directory.
func TestLazyZipFS(t *testing.T) {
	v, err := assets.LoadVerified()
	if err != nil {
		t.Fatal(err)
	}
	eager, err := zipFS(v.TZData)
	if err != nil {
		t.Fatal(err)
	}
	lazy := lazyZipFS(v.TZData, "tzdata.zip")
	want, err := fs.ReadFile(eager, "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fs.ReadFile(lazy, "Europe/Paris"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("lazy read: %v", err)
	}
	broken := lazyZipFS([]byte("not a zip"), "stdlib.zip")
	for range 2 {
		_, err := broken.Open("os.py")
		if !errors.Is(err, ErrInterpreter) || !strings.Contains(err.Error(), "stdlib.zip") {
			t.Fatalf("broken archive: %v, want ErrInterpreter naming stdlib.zip", err)
		}
	}
}
