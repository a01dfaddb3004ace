package wheels

import (
	"archive/zip"
	"bytes"
	"strings"
	"testing"
)

// TestReadEntryBudget: readEntry refuses an entry larger than what is left of the unpacked size limit, before
// decompressing a byte, and reads one that fits exactly (the caller's check of the declared sizes makes this
// unreachable through unpack today; readEntry keeps its own bound so that it never depends on that order).
func TestReadEntryBudget(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("pkg/data.txt")
	w.Write([]byte(strings.Repeat("x", 1000)))
	zw.Close()
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	f := zr.File[0]
	if _, err := readEntry(f, 999); err == nil || !strings.Contains(err.Error(), "exceed what is left") {
		t.Errorf("an entry one byte over the budget: %v", err)
	}
	if b, err := readEntry(f, 1000); err != nil || len(b) != 1000 {
		t.Errorf("an entry of exactly the budget: %d bytes, %v", len(b), err)
	}
}
