package wasmbox_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
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
