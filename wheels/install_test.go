package wheels

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

var _ Layer = (*vfs.FS)(nil)

func TestInstallMemLayer(t *testing.T) {
	wh := open(t, house(t, realWorld(), nil), allowAll)
	p, err := wh.Resolve(bg, "textfmt", "")
	if err != nil {
		t.Fatal(err)
	}
	var layer MemLayer
	inst, err := p.Install(bg, &layer)
	if err != nil {
		t.Fatal(err)
	}
	if len(inst) != 2 || inst[0].Project != "wcwidthlite" || inst[1].Project != "textfmt" || inst[1].AlreadyPresent {
		t.Fatalf("Installed = %+v", inst)
	}
	want := []string{
		"textfmt-2.0.dist-info/INSTALLER", "textfmt-2.0.dist-info/METADATA", "textfmt-2.0.dist-info/RECORD", "textfmt-2.0.dist-info/WHEEL",
		"textfmt/__init__.py", "textfmt/table.py",
		"wcwidthlite-0.2.1.dist-info/INSTALLER", "wcwidthlite-0.2.1.dist-info/METADATA", "wcwidthlite-0.2.1.dist-info/RECORD", "wcwidthlite-0.2.1.dist-info/WHEEL",
		"wcwidthlite/__init__.py",
	}
	if got := layer.Paths(); !slices.Equal(got, want) {
		t.Errorf("layer = %v", got)
	}
	if !slices.Equal(inst[1].Files[:2], []string{"textfmt/__init__.py", "textfmt/table.py"}) || !strings.HasSuffix(inst[1].Files[len(inst[1].Files)-1], "/RECORD") {
		t.Errorf("Files = %v (package files first, RECORD last)", inst[1].Files)
	}
	if b, _ := layer.ReadFile("textfmt-2.0.dist-info/INSTALLER"); string(b) != "wasmbox\n" {
		t.Errorf("INSTALLER = %q", b)
	}
	if err := fstest.TestFS(&layer, want...); err != nil {
		t.Error(err)
	}

	// The same version again: a no-op.
	inst, err = p.Install(bg, &layer)
	if err != nil || !inst[0].AlreadyPresent || !inst[1].AlreadyPresent || inst[1].Files != nil {
		t.Errorf("reinstall: %+v, %v", inst, err)
	}
	// A plan that shares a dependency installs only what is missing.
	p1, err := wh.Resolve(bg, "wcwidthlite", "")
	if err != nil {
		t.Fatal(err)
	}
	if inst, err := p1.Install(bg, &layer); err != nil || !inst[0].AlreadyPresent {
		t.Errorf("dependency alone: %+v, %v", inst, err)
	}
	// Another version: the layer is append-only.
	p2, err := wh.Resolve(bg, "textfmt", "<2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p2.Install(bg, &layer)
	wantErr(t, err, ErrConflict, "textfmt", "already has version 2.0", "append-only")
	if slices.Contains(layer.Paths(), "textfmt-1.0.dist-info/METADATA") {
		t.Error("a conflicting install wrote to the layer")
	}
}

func TestInstallFileConflict(t *testing.T) {
	tws := []testWheel{
		{Name: "one", Version: "1.0", Files: map[string]string{"common/util.py": "one = 1\n"}},
		{Name: "two", Version: "1.0", Files: map[string]string{"common/util.py": "two = 2\n"}},
		{Name: "three", Version: "1.0", Files: map[string]string{"common/util.py": "one = 1\n", "three.py": ""}},
	}
	wh := open(t, house(t, tws, nil), allowAll)
	var layer MemLayer
	for _, name := range []string{"one", "three"} { // identical content is fine
		p, err := wh.Resolve(bg, name, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Install(bg, &layer); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	p, err := wh.Resolve(bg, "two", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Install(bg, &layer)
	e := wantErr(t, err, ErrConflict, "common/util.py", "other content")
	if e == nil || !slices.Equal(e.Files, []string{"common/util.py"}) {
		t.Errorf("Error = %+v", e)
	}
	if b, _ := layer.ReadFile("common/util.py"); string(b) != "one = 1\n" {
		t.Errorf("overwritten: %q", b)
	}
}

func TestInstallVFS(t *testing.T) {
	wh := open(t, house(t, realWorld(), nil), allowAll)
	p, err := wh.Resolve(bg, "textfmt", "")
	if err != nil {
		t.Fatal(err)
	}
	ws := vfs.New(vfs.Limits{})
	if _, err := p.Install(bg, ws); err != nil {
		t.Fatal(err)
	}
	if b, err := ws.ReadFile("textfmt/table.py"); err != nil || string(b) != "def table(rows): return rows\n" {
		t.Errorf("table.py = %q, %v", b, err)
	}
	if inst, err := p.Install(bg, ws); err != nil || !inst[1].AlreadyPresent {
		t.Errorf("reinstall: %+v, %v", inst, err)
	}
	p2, _ := wh.Resolve(bg, "textfmt", "==1.0")
	_, err = p2.Install(bg, ws)
	wantErr(t, err, ErrConflict, "already has version 2.0")

	// A quota error from the layer comes back wrapped.
	small := vfs.New(vfs.Limits{MaxBytes: 100})
	inst, err := p.Install(bg, small)
	if !errors.Is(err, vfs.ENOSPC) || !strings.HasPrefix(err.Error(), "wheels: install ") || len(inst) != 0 {
		t.Errorf("quota: %+v, %v", inst, err)
	}
}

// writeOnly is a Layer that cannot be read: Install treats it as empty.
type writeOnly struct {
	mu    sync.Mutex
	files map[string]string
}

func (w *writeOnly) MkdirAll(string, fs.FileMode) error { return nil }
func (w *writeOnly) WriteFile(p string, data []byte, _ fs.FileMode) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.files[p] = string(data)
	return nil
}

func TestInstallWriteOnlyAndCancel(t *testing.T) {
	wh := open(t, house(t, realWorld(), nil), allowAll)
	p, err := wh.Resolve(bg, "textfmt", "")
	if err != nil {
		t.Fatal(err)
	}
	w := &writeOnly{files: map[string]string{}}
	if _, err := p.Install(bg, w); err != nil || len(w.files) != 11 {
		t.Errorf("%d files, %v", len(w.files), err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := p.Install(ctx, new(MemLayer)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestMemLayer(t *testing.T) {
	var l MemLayer
	if err := fstest.TestFS(&l); err != nil { // the empty zero value
		t.Error(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.MkdirAll("a/b/c", 0o755))
	must(l.WriteFile("a/b/file.txt", []byte("hello"), 0o644))
	must(l.WriteFile("top.py", nil, 0o644))
	must(l.WriteFile("a/b/file.txt", []byte("hello"), 0o644)) // identical: fine
	if err := l.WriteFile("a/b/file.txt", []byte("changed"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("overwrite: %v", err)
	}
	for _, bad := range []string{"/abs", "../up", "a/../b", "", "."} {
		if err := l.WriteFile(bad, nil, 0o644); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("WriteFile(%q) = %v", bad, err)
		}
	}
	if err := l.WriteFile("a/b", nil, 0o644); err == nil {
		t.Error("file over a directory")
	}
	if err := l.MkdirAll("top.py/x", 0o755); err == nil {
		t.Error("directory under a file")
	}
	if err := l.WriteFile("top.py/x", nil, 0o644); err == nil {
		t.Error("file under a file")
	}
	if err := fstest.TestFS(&l, "a/b/file.txt", "a/b/c", "top.py"); err != nil {
		t.Error(err)
	}
	if _, err := l.ReadFile("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(nope) = %v", err)
	}
}

// flaky fails every WriteFile after the first n.
type flaky struct {
	*MemLayer
	mu sync.Mutex
	n  int
}

func (f *flaky) WriteFile(p string, data []byte, perm fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return errors.New("disk full")
	}
	f.n--
	return f.MemLayer.WriteFile(p, data, perm)
}

func TestInstallInterruptedThenRetried(t *testing.T) {
	wh := open(t, house(t, realWorld(), nil), allowAll)
	p, err := wh.Resolve(bg, "textfmt", "")
	if err != nil {
		t.Fatal(err)
	}
	layer := new(MemLayer)
	// wcwidthlite has 5 files, textfmt 6: the 9th write (textfmt's METADATA) fails, its RECORD never comes.
	inst, err := p.Install(bg, &flaky{MemLayer: layer, n: 8})
	if err == nil || !strings.Contains(err.Error(), "disk full") || len(inst) != 1 || inst[0].Project != "wcwidthlite" {
		t.Fatalf("interrupted: %+v, %v", inst, err)
	}
	inst, err = p.Install(bg, layer)
	if err != nil || !inst[0].AlreadyPresent || inst[1].AlreadyPresent {
		t.Fatalf("retry: %+v, %v", inst, err)
	}
	if n := len(layer.Paths()); n != 11 {
		t.Errorf("%d files after the retry", n)
	}
}

func TestFileAndDirectory(t *testing.T) {
	w := testWheel{Name: "clash", Version: "1.0", Files: map[string]string{"clash": "", "clash/x.py": ""}}
	_, err := open(t, house(t, []testWheel{w}, nil), allowAll).Resolve(bg, "clash", "")
	wantErr(t, err, ErrBadWheel, "both a file and a directory")
}
