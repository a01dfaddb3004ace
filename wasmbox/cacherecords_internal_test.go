//go:build unix

package wasmbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/assets"
)

// hostileRecord replaces path by what an attacker with write access to the cache (or a confused tool) put there
// in round 3: a symlink to /dev/zero (the reader took the process past 3 GiB), a FIFO (it hung), a huge file.
func hostileRecords(t *testing.T) map[string]func(path string) {
	return map[string]func(string){
		"symlink to /dev/zero": func(p string) {
			os.Remove(p)
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		},
		"FIFO": func(p string) {
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"oversized": func(p string) {
			if err := os.WriteFile(p, make([]byte, maxRecordBytes+1), 0o600); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// within fails the test if fn does not return in d (a read that blocks on a FIFO never would).
func within(t *testing.T, d time.Duration, name string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still reading after %v", name, d)
	}
}

// TestHostileCacheRecords: the executable record and the artifact manifest are read bounded, a record that is
// not a regular file is refused without blocking, and both are rebuilt as regular files.
func TestHostileCacheRecords(t *testing.T) {
	saved := executableIdentity
	defer func() { executableIdentity = saved }()
	executableIdentity = func() (fileIdentity, bool) {
		return fileIdentity{Dev: 1, Ino: 7, Size: 1, MtimeNs: 1, CtimeNs: 1}, true
	}
	v, err := assets.LoadVerified()
	if err != nil {
		t.Fatal(err)
	}
	for name, spoil := range hostileRecords(t) {
		cache := t.TempDir()
		dir := filepath.Join(cache, "artifacts")
		if _, err := loadAssets(dir); err != nil {
			t.Fatal(err)
		}
		exe, _ := exeRecordPath(dir)
		spoil(exe)
		within(t, 20*time.Second, name+" executable record", func() {
			if _, err := loadAssets(dir); err != nil {
				t.Errorf("%s executable record: %v", name, err)
			}
		})
		if fi, err := os.Lstat(exe); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxRecordBytes {
			t.Errorf("%s executable record not rebuilt: %v %v", name, fi, err)
		}

		loadTraced(t, cache)
		_, manifest := artifactPaths(dir, v.WasmGzSHA256)
		spoil(manifest)
		within(t, 60*time.Second, name+" artifact manifest", func() {
			if _, gunzipped := loadTraced(t, cache); !gunzipped {
				t.Errorf("%s artifact manifest: trusted", name)
			}
		})
		if fi, err := os.Lstat(manifest); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxRecordBytes {
			t.Errorf("%s artifact manifest not rebuilt: %v %v", name, fi, err)
		}
		if _, gunzipped := loadTraced(t, cache); gunzipped {
			t.Errorf("%s: the rebuilt manifest is not used", name)
		}
	}
}
