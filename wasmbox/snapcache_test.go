package wasmbox_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/internal/testcache"
	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
	"github.com/wasmbox/wasmbox/wheels/wheeltest"
)

// A snapshot saved by one Sandbox is what the next one (as a new process would) starts from; a damaged saved
// snapshot is ignored, never run.
func TestSavedSnapshot(t *testing.T) {
	dir := t.TempDir()
	cfg := wasmbox.Config{CacheDir: dir, Preload: []string{"csv"}}
	first := newSandbox(t, cfg)
	imgs, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*.img"))
	if len(imgs) != 1 {
		t.Fatalf("saved snapshots: %v", imgs)
	}
	second := newSandbox(t, cfg)
	for _, sb := range []*wasmbox.Sandbox{first, second, second} {
		res := run(t, sb, "import sys\nx = 1\nprint('csv' in sys.modules, 'x' in dir(__import__('builtins')))")
		if res.Stdout != "True False\n" {
			t.Fatalf("stdout %q", res.Stdout)
		}
	}
	// Another configuration gets its own snapshot.
	newSandbox(t, wasmbox.Config{CacheDir: dir})
	if imgs, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*.img")); len(imgs) != 2 {
		t.Fatalf("saved snapshots after a second configuration: %v", imgs)
	}
	// A damaged snapshot is not used: the sandbox initialises afresh and works.
	for _, img := range imgs {
		if err := os.WriteFile(img, []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	third := newSandbox(t, cfg)
	if res := run(t, third, "import sys\nprint('csv' in sys.modules)"); res.Stdout != "True\n" {
		t.Fatalf("after damage: %q", res.Stdout)
	}
}

// Two Sandboxes that share a CacheDir but install different packages each run their own: the saved snapshot's key
// covers the package layer's content (a preloaded module lives in the snapshot's memory), down to a file that
// differs only in its bytes.
func TestSavedSnapshotKeyCoversPackages(t *testing.T) {
	greet := func(version, says string) *wheels.Wheelhouse {
		t.Helper()
		dir := t.TempDir()
		w := wheeltest.Wheel{Name: "greet", Version: version, Files: map[string]string{"greet.py": "SAYS = " + strconv.Quote(says) + "\n"}}
		if _, err := w.Write(dir); err != nil {
			t.Fatal(err)
		}
		wh, err := wheels.Open(dir, wheels.Options{Allow: []string{"greet"}})
		if err != nil {
			t.Fatal(err)
		}
		return wh
	}
	cases := []struct {
		name string
		a, b *wheels.Wheelhouse
		says [2]string // what a's and b's Sandboxes print
	}{
		{"versions", greet("1.0", "one"), greet("2.0", "two"), [2]string{"one 1.0", "two 2.0"}},
		// Same project, version, paths and sizes: only the module's bytes differ.
		{"content", greet("1.0", "aaa"), greet("1.0", "bbb"), [2]string{"aaa 1.0", "bbb 1.0"}},
	}
	dir := t.TempDir() // one CacheDir for all: the interpreter is compiled once
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i, wh := range []*wheels.Wheelhouse{c.a, c.b, c.a} {
				sb := newSandbox(t, wasmbox.Config{CacheDir: dir, Wheelhouse: wh, Packages: []string{"greet"}, Preload: []string{"greet"}})
				res := run(t, sb, "import greet, importlib.metadata as m\nprint(greet.SAYS, m.version('greet'))")
				if w := c.says[i%2]; res.Stdout != w+"\n" {
					t.Errorf("sandbox %d: stdout %q, want %q", i+1, res.Stdout, w)
				}
				sb.Close(context.Background())
			}
		})
	}
	// One snapshot per package layer: the third Sandbox of each case started from the first's.
	if imgs, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*.img")); len(imgs) != 4 {
		t.Errorf("saved snapshots: %d, want 4", len(imgs))
	}
}

// A later process finds the snapshot module's compiled code through the wazero ID saved beside the module, without
// a pass over the module: with the ID it reports no compile; without one it hashes the module and saves the ID;
// a wrong ID only makes it guess wrongly that the code must be compiled (wazero names the code it loads itself),
// and the run is right either way.
func TestSnapshotModuleID(t *testing.T) {
	newSandbox(t, wasmbox.Config{}) // the test cache holds the snapshot module and its code
	src := testcache.Dir()
	ids, _ := filepath.Glob(filepath.Join(src, "snapshots", "module-*.id"))
	if len(ids) != 1 {
		t.Fatalf("saved module IDs: %v", ids)
	}
	want, err := os.ReadFile(ids[0])
	if err != nil || len(bytes.TrimSpace(want)) != 64 {
		t.Fatalf("module ID %q: %v", want, err)
	}
	// cacheCopy copies the snapshots and the compiled code into a new cache (a new process would read them so),
	// then lets edit change it.
	cacheCopy := func(edit func(idFile string)) string {
		dst := t.TempDir()
		dirs, _ := filepath.Glob(filepath.Join(src, "wazero-*"))
		for _, d := range append(dirs, filepath.Join(src, "snapshots")) {
			filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
				if err != nil || de.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(src, p)
				b, err := os.ReadFile(p)
				if err == nil {
					err = os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o700)
				}
				if err == nil {
					err = os.WriteFile(filepath.Join(dst, rel), b, 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
				return nil
			})
		}
		if edit != nil {
			edit(filepath.Join(dst, "snapshots", filepath.Base(ids[0])))
		}
		return dst
	}
	for _, c := range []struct {
		name     string
		edit     func(idFile string)
		compiles bool
	}{
		{"saved ID", nil, false},
		{"no ID", func(p string) { os.Remove(p) }, false},
		{"wrong ID", func(p string) { os.WriteFile(p, []byte(strings.Repeat("0", 64)+"\n"), 0o600) }, true},
		// A damaged module is removed and made again from the interpreter: the same bytes as before, whose code
		// the cache holds.
		{"damaged module", func(p string) {
			m := strings.TrimSuffix(p, ".id") + ".wasm"
			b, _ := os.ReadFile(m)
			os.WriteFile(m, b[:len(b)/2], 0o600)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := cacheCopy(c.edit)
			var events []string
			sb := newSandbox(t, wasmbox.Config{CacheDir: dir, OnCompile: func(e wasmbox.CompileEvent) {
				if !e.Done {
					events = append(events, e.Module)
				}
			}})
			if res := run(t, sb, "print(6 * 7)"); res.Stdout != "42\n" {
				t.Fatalf("stdout %q", res.Stdout)
			}
			if got := slices.Contains(events, "snapshot module"); got != c.compiles {
				t.Errorf("reported compiling the snapshot module: %v, want %v (events %v)", got, c.compiles, events)
			}
			if c.name == "no ID" || c.name == "damaged module" {
				if got, err := os.ReadFile(filepath.Join(dir, "snapshots", filepath.Base(ids[0]))); err != nil || !bytes.Equal(got, want) {
					t.Errorf("the ID saved for the next process is %q (%v), want %q", got, err, want)
				}
			}
		})
	}
}
