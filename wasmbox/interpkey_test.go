package wasmbox_test

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// withStdlibFile returns a copy of the embedded interpreter whose stdlib holds one more file (the same wasm and
// the same declared hash).
func withStdlibFile(t *testing.T, name, content string) *assets.Interpreter {
	t.Helper()
	base, err := assets.Load()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(base.Stdlib), int64(len(base.Stdlib)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		if err := zw.Copy(f); err != nil {
			t.Fatal(err)
		}
	}
	w, err := zw.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, content)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	c := *base
	c.Stdlib = buf.Bytes()
	return &c
}

// Two Interpreters with the same wasm (and the same declared hash) but different stdlibs never share a compiled
// interpreter or its file systems within one process: each Sandbox imports from its own stdlib.
func TestInterpreterCacheKeyedByContent(t *testing.T) {
	ctx := context.Background()
	for _, v := range []string{"one", "two"} {
		it := withStdlibFile(t, "wbx_marker.py", "WHICH = '"+v+"'\n")
		sb, err := wasmbox.New(ctx, wasmbox.Config{Interpreter: it, DisableCompileCache: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sb.Run(ctx, "import wbx_marker; print(wbx_marker.WHICH)")
		sb.Close(ctx)
		if err != nil || res.Stdout != v+"\n" {
			t.Fatalf("stdlib %s: stdout %q, stderr %q, err %v", v, res.Stdout, res.Stderr, err)
		}
	}
}
