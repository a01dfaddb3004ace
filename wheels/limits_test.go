package wheels

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"hash/crc32"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates (the test runs alone: nothing else in the package is parallel).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// declaredSize is the sum of the uncompressed sizes a wheel's entries declare.
func declaredSize(t *testing.T, data []byte) int64 {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range zr.File {
		n += int64(f.UncompressedSize64)
	}
	return n
}

// Each .dist-info file that is parsed whole has a size limit, checked before it is decompressed; a file at the
// limit is fine.
func TestParsedFileLimits(t *testing.T) {
	base := testWheel{Name: "big-meta", Version: "1.0"}
	di := base.distInfo()
	over := func(n int) string { return strings.Repeat("x", n+1) }
	cases := []struct {
		file  string
		wheel func(w testWheel) testWheel
	}{
		{"METADATA", func(w testWheel) testWheel { w.Description = over(MaxMetadataFileSize); return w }},
		{"WHEEL", func(w testWheel) testWheel {
			w.WheelFile = "Wheel-Version: 1.0\nTag: py3-none-any\n\n" + over(MaxMetadataFileSize)
			return w
		}},
		{"entry_points.txt", func(w testWheel) testWheel {
			w.Files = map[string]string{"big_meta/__init__.py": "", di + "/entry_points.txt": over(MaxMetadataFileSize)}
			return w
		}},
		{"RECORD", func(w testWheel) testWheel { w.RecordPad = strings.Repeat("\n", MaxRecordFileSize+1); return w }},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			w := c.wheel(base)
			wh := open(t, house(t, []testWheel{w}, nil), Options{Allow: []string{"*"}})
			_, err := wh.Resolve(bg, "big-meta", "")
			wantErr(t, err, ErrBadWheel, di+"/"+c.file, "the limit for this file")
		})
	}
	// METADATA of exactly the limit installs.
	w := base
	w.Description = "x"
	n := MaxMetadataFileSize - len(strings.SplitAfter(string(metadataOf(t, w)), "\n\n")[0]) - 1
	w.Description = strings.Repeat("x", n) + "\n"
	if got := len(metadataOf(t, w)); got != MaxMetadataFileSize {
		t.Fatalf("METADATA built at %d bytes, want %d", got, MaxMetadataFileSize)
	}
	wh := open(t, house(t, []testWheel{w}, nil), Options{Allow: []string{"*"}})
	if _, err := wh.Resolve(bg, "big-meta", ""); err != nil {
		t.Fatalf("METADATA at the limit: %v", err)
	}
}

func metadataOf(t *testing.T, w testWheel) []byte {
	t.Helper()
	data := w.bytes()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name == w.distInfo()+"/METADATA" {
			rc, _ := f.Open()
			var b bytes.Buffer
			b.ReadFrom(rc)
			rc.Close()
			return b.Bytes()
		}
	}
	t.Fatal("no METADATA")
	return nil
}

// Options.MaxUnpackedSize is the zip-bomb limit: a wheel of exactly the limit installs, one byte less refuses it.
func TestMaxUnpackedSizeOption(t *testing.T) {
	w := testWheel{Name: "sized", Version: "1.0", Files: map[string]string{"sized.py": strings.Repeat("# pad\n", 4000)}}
	total := declaredSize(t, w.bytes())
	dir := house(t, []testWheel{w}, nil)
	if _, err := open(t, dir, Options{Allow: []string{"*"}, MaxUnpackedSize: total}).Resolve(bg, "sized", ""); err != nil {
		t.Fatalf("at the limit (%d bytes): %v", total, err)
	}
	_, err := open(t, dir, Options{Allow: []string{"*"}, MaxUnpackedSize: total - 1}).Resolve(bg, "sized", "")
	wantErr(t, err, ErrBadWheel, "unpacks to more than", w.fileName())
	// The default applies to the zero value; a negative limit is invalid.
	if _, err := open(t, dir, Options{Allow: []string{"*"}}).Resolve(bg, "sized", ""); err != nil {
		t.Fatalf("default limit: %v", err)
	}
	_, err = Open(dir, Options{MaxUnpackedSize: -1})
	wantErr(t, err, ErrInvalid, "MaxUnpackedSize")
}

// A zip bomb is refused before it is decompressed: refusing 64 MiB of zeros under an 8 MiB limit allocates far
// less than the limit (reading up to the limit first would allocate all of it).
func TestZipBombNotBuffered(t *testing.T) {
	const limit = 8 << 20
	w := testWheel{Name: "bomb", Version: "1.0", Files: map[string]string{"bomb.py": strings.Repeat("\x00", 64<<20)}}
	data := w.bytes()
	if len(data) > 1<<20 {
		t.Fatalf("the bomb is %d bytes compressed", len(data))
	}
	var err error
	n := allocated(func() { _, err = unpack(data, limit) })
	if err == nil || !strings.Contains(err.Error(), "unpacks to more than 8388608 bytes") {
		t.Fatalf("err = %v", err)
	}
	if n > 2<<20 {
		t.Errorf("refusing the bomb allocated %d bytes (limit %d)", n, limit)
	}
}

// An entry whose data goes on past the size it declares is refused after that size, not at the limit.
func TestEntryLongerThanDeclared(t *testing.T) {
	good := testWheel{Name: "liar", Version: "1.0"}.bytes()
	zr, err := zip.NewReader(bytes.NewReader(good), int64(len(good)))
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
	var comp bytes.Buffer
	fw, _ := flate.NewWriter(&comp, flate.BestCompression)
	zeros := make([]byte, 32<<20)
	fw.Write(zeros)
	fw.Close()
	raw, err := zw.CreateRaw(&zip.FileHeader{Name: "liar/data.bin", Method: zip.Deflate,
		CompressedSize64: uint64(comp.Len()), UncompressedSize64: 10, CRC32: crc32.ChecksumIEEE(zeros[:10])})
	if err != nil {
		t.Fatal(err)
	}
	raw.Write(comp.Bytes())
	zw.Close()
	data := buf.Bytes()
	zeros = nil
	n := allocated(func() { _, err = unpack(data, DefaultMaxUnpackedSize) })
	if err == nil || !strings.Contains(err.Error(), "liar/data.bin") {
		t.Fatalf("err = %v", err)
	}
	if n > 4<<20 {
		t.Errorf("refusing the entry allocated %d bytes", n)
	}
}

// Header continuation lines are joined once: parsing costs memory linear in the input, not quadratic.
func TestHeaderContinuationsLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString("Name: x\nSummary: a\n")
	const lines = 64 << 10
	for range lines {
		b.WriteString("\t.\n")
	}
	b.WriteString("Version: 1.0\n\nbody\n")
	data := []byte(b.String())
	var h headers
	n := allocated(func() { h = parseHeaders(data) })
	if want := "a" + strings.Repeat(" .", lines); h.get("summary") != want || h.get("version") != "1.0" || h.get("name") != "x" {
		t.Fatalf("parsed %d-byte summary, version %q", len(h.get("summary")), h.get("version"))
	}
	if limit := uint64(64 * len(data)); n > limit {
		t.Errorf("parsing %d bytes allocated %d (more than %d)", len(data), n, limit)
	}
}
