package zipfs_test

import (
	"archive/zip"
	"bytes"
	"io"
	"testing"
	"testing/fstest"

	"github.com/wasmbox/wasmbox/internal/zipfs"
)

func TestFS(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range map[string]string{"a/b/c.txt": "hello, world", "top.py": "print(1)", "empty/": ""} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	zw.Close()
	zr, _ := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	f, err := zipfs.New(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(f, "a/b/c.txt", "top.py", "empty"); err != nil {
		t.Fatal(err)
	}
	fh, _ := f.Open("a/b/c.txt")
	s, ok := fh.(io.Seeker)
	if !ok {
		t.Fatal("files must be seekable")
	}
	s.Seek(7, io.SeekStart)
	rest, _ := io.ReadAll(fh)
	if string(rest) != "world" {
		t.Errorf("after seek: %q", rest)
	}
}

func TestRejectsBadNames(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.Create("../evil")
	zw.Close()
	zr, _ := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if _, err := zipfs.New(zr); err == nil {
		t.Fatal("accepted ../evil")
	}
}
