package wasmbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wasmbox/wasmbox/internal/testcache"
	"github.com/wasmbox/wasmbox/wasmbox"
)

var precompiled = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp(testcache.TempDir(), "precompiled-") // removed when the tests end
	if err != nil {
		return "", err
	}
	return dir, wasmbox.Precompile(context.Background(), filepath.Join(dir, "pre"), wasmbox.Config{})
})

// precompiledCopy returns a private copy of the test's precompiled directory, changed by edit.
func precompiledCopy(t *testing.T, edit func(dir string)) string {
	t.Helper()
	src, err := precompiled()
	if err != nil {
		t.Fatal(err)
	}
	src = filepath.Join(src, "pre")
	dst := filepath.Join(t.TempDir(), "pre")
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(dst)
	}
	return dst
}

// A sandbox started from a precompiled directory compiles and initialises nothing: its own cache stays empty,
// and it runs.
func TestPrecompiledDir(t *testing.T) {
	ctx := context.Background()
	dir := precompiledCopy(t, nil) // a copy: new inodes and times, as in an image layer
	cache := t.TempDir()
	var events []wasmbox.CompileEvent
	sb, err := wasmbox.New(ctx, wasmbox.Config{PrecompiledDir: dir, CacheDir: cache,
		OnCompile: func(e wasmbox.CompileEvent) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, "print(6 * 7)")
	if err != nil || res.Stdout != "42\n" {
		t.Fatalf("run: %q %v", res.Stdout, err)
	}
	if len(events) != 0 {
		t.Errorf("compiled with a precompiled directory: %+v", events)
	}
	filepath.WalkDir(cache, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(path, "artifacts") {
			t.Errorf("the cache got %s: something was compiled or initialised", path)
		}
		return nil
	})
	// Refusals of the same directory with another engine or an empty one.
	if _, err := wasmbox.New(ctx, wasmbox.Config{PrecompiledDir: t.TempDir()}); !errors.Is(err, wasmbox.ErrPrecompiled) {
		t.Errorf("empty directory: %v, want ErrPrecompiled", err)
	}
	if err := wasmbox.Precompile(ctx, dir, wasmbox.Config{}); !errors.Is(err, wasmbox.ErrInvalidConfig) {
		t.Errorf("Precompile into a full directory: %v, want ErrInvalidConfig", err)
	}
}

// A precompiled directory made by another version or machine, for another interpreter, or changed since, is
// refused with an error that names the difference; it is never loaded.
func TestPrecompiledDirRefused(t *testing.T) {
	manifest := func(change func(m map[string]any)) func(string) {
		return func(dir string) {
			p := filepath.Join(dir, "precompiled.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]any{}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			change(m)
			b, _ = json.Marshal(m)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// file returns the first listed file whose path contains part.
	file := func(dir, part string) string {
		var found string
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && found == "" && strings.Contains(path, part) {
				found = path
			}
			return nil
		})
		if found == "" {
			t.Fatalf("no file matching %q in %s", part, dir)
		}
		return found
	}
	// flip changes one byte in the middle of every file whose path contains part.
	flip := func(part string) func(string) {
		return func(dir string) {
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.Contains(p, part) {
					return err
				}
				b, _ := os.ReadFile(p)
				b[len(b)/2] ^= 1
				return os.WriteFile(p, b, 0o644)
			})
		}
	}
	for _, c := range []struct {
		name, want string
		edit       func(string)
	}{
		{"wazero version", "wazero version", manifest(func(m map[string]any) { m["wazero"] = "v1.11.0" })},
		{"GOARCH", "GOARCH", manifest(func(m map[string]any) { m["goarch"] = "riscv64" })},
		{"CPU", "CPU features", manifest(func(m map[string]any) { m["cpu_features"] = 12345 })},
		{"format", "format", manifest(func(m map[string]any) { m["format"] = "wasmbox-precompiled-v0" })},
		{"ABI", "ABI version", manifest(func(m map[string]any) { m["abi_version"] = 0 })},
		{"interpreter", "another interpreter", manifest(func(m map[string]any) { m["python_wasm_gz_sha256"] = strings.Repeat("0", 64) })},
		{"stdlib", "another interpreter", manifest(func(m map[string]any) { m["data_id"] = "embedded 0 0" })},
		{"interpreter hash", "precompiled directory refused", manifest(func(m map[string]any) { m["interpreter_sha256"] = strings.Repeat("0", 64) })},
		{"truncated snapshot", ".img has", func(dir string) { os.Truncate(file(dir, ".img"), 65536) }},
		{"changed snapshot", "changed since", flip(".img")},
		{"changed snapshot module", "changed since", flip("module-")},
		{"changed compiled code", "changed since", flip("wazero-")},
		{"missing file", "no such file", func(dir string) { os.Remove(file(dir, ".sp")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := precompiledCopy(t, c.edit)
			sb, err := wasmbox.New(context.Background(), wasmbox.Config{PrecompiledDir: dir, CacheDir: t.TempDir()})
			if err == nil {
				sb.Close(context.Background())
			}
			if !errors.Is(err, wasmbox.ErrPrecompiled) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrPrecompiled naming %q", err, c.want)
			}
		})
	}
}

// A snapshot-only directory holds one compiled module (the one a run needs), starts its own configuration, and
// refuses another with an error that says why, instead of compiling.
func TestPrecompiledSnapshotOnly(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pre")
	if err := wasmbox.PrecompileSnapshotOnly(ctx, dir, wasmbox.Config{}); err != nil {
		t.Fatal(err)
	}
	code, _ := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	if len(code) != 1 {
		t.Fatalf("compiled modules in a snapshot-only directory: %v, want 1", code)
	}
	sb, err := wasmbox.New(ctx, wasmbox.Config{PrecompiledDir: dir, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	if res, err := sb.Run(ctx, "print(6 * 7)"); err != nil || res.Stdout != "42\n" {
		t.Fatalf("run: %v %v", res, err)
	}
	_, err = wasmbox.New(ctx, wasmbox.Config{PrecompiledDir: dir, CacheDir: t.TempDir(), Preload: []string{"csv"}})
	if !errors.Is(err, wasmbox.ErrPrecompiled) || !strings.Contains(err.Error(), "one configuration only") {
		t.Fatalf("another configuration: %v, want ErrPrecompiled saying the directory serves one configuration", err)
	}
}
