package wheels

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBadWheels(t *testing.T) {
	base := func() testWheel { return testWheel{Name: "evil", Version: "1.0"} }
	di := base().distInfo()
	cases := []struct {
		name  string
		wheel func() testWheel
		words []string
	}{
		{"zip slip", func() testWheel {
			w := base()
			w.Files = map[string]string{"../../etc/cron.d/evil": "x", "evil/__init__.py": ""}
			return w
		}, []string{"escapes the install root"}},
		{"zip slip inside", func() testWheel {
			w := base()
			w.Files = map[string]string{"evil/../../x.py": "x"}
			return w
		}, []string{"escapes"}},
		{"absolute path", func() testWheel {
			w := base()
			w.Files = map[string]string{"/usr/lib/python3.13/os.py": "x"}
			return w
		}, []string{"absolute"}},
		{"backslash", func() testWheel {
			w := base()
			w.Files = map[string]string{`..\..\evil.py`: "x"}
			return w
		}, []string{"backslash"}},
		{"drive letter", func() testWheel {
			w := base()
			w.Files = map[string]string{"C:/evil.py": "x"}
			return w
		}, []string{"drive letter"}},
		{"unclean path", func() testWheel {
			w := base()
			w.Files = map[string]string{"evil//x.py": "x"}
			return w
		}, []string{"not clean"}},
		{"symlink", func() testWheel {
			w := base()
			w.Raw = []rawEntry{{name: "evil/link", data: "/etc/passwd", mode: fs.ModeSymlink | 0o777}}
			return w
		}, []string{"symbolic link"}},
		{"RECORD hash mismatch", func() testWheel {
			w := base()
			w.RecordOverride = map[string]string{"evil/__init__.py": recordLine("evil/__init__.py", []byte("something else"))}
			return w
		}, []string{"hash mismatch", "evil/__init__.py"}},
		{"RECORD size mismatch", func() testWheel {
			w := base()
			l := recordLine("evil/__init__.py", []byte(`__version__ = "1.0"`+"\n"))
			w.RecordOverride = map[string]string{"evil/__init__.py": l[:strings.LastIndexByte(l, ',')] + ",999"}
			return w
		}, []string{"size mismatch"}},
		{"RECORD md5", func() testWheel {
			w := base()
			w.RecordOverride = map[string]string{"evil/__init__.py": "evil/__init__.py,md5=1B2M2Y8AsgTpgAmY7PhCfg,0"}
			return w
		}, []string{"unsupported hash"}},
		{"RECORD no hash", func() testWheel {
			w := base()
			w.RecordOverride = map[string]string{"evil/__init__.py": "evil/__init__.py,,"}
			return w
		}, []string{"no hash"}},
		{"file not in RECORD", func() testWheel {
			w := base()
			w.NoRecordFor = []string{"evil/__init__.py"}
			return w
		}, []string{"RECORD does not list evil/__init__.py"}},
		{"unlisted extra entry", func() testWheel {
			w := base()
			w.Raw = []rawEntry{{name: "evil/backdoor.py", data: "import os"}}
			return w
		}, []string{"RECORD does not list evil/backdoor.py"}},
		{"RECORD lists a missing file", func() testWheel {
			w := base()
			w.RecordOverride = map[string]string{"evil/__init__.py": recordLine("evil/gone.py", nil) + "\n" + recordLine("evil/__init__.py", []byte(`__version__ = "1.0"`+"\n"))}
			return w
		}, []string{"evil/gone.py", "not in the archive"}},
		{"missing METADATA", func() testWheel {
			w := base()
			w.NoMetadata = true
			return w
		}, []string{di + "/METADATA is missing"}},
		{"METADATA name differs", func() testWheel {
			w := base()
			w.MetadataName = "other"
			return w
		}, []string{"does not match METADATA Name"}},
		{"two dist-infos", func() testWheel {
			w := base()
			w.Files = map[string]string{"other-1.0.dist-info/METADATA": "Name: other\nVersion: 1.0\n"}
			return w
		}, []string{"more than one .dist-info"}},
		{"purelib into another dist-info", func() testWheel {
			w := base()
			w.Files = map[string]string{"evil-1.0.data/purelib/requests-9.0.dist-info/METADATA": "Name: requests\nVersion: 9.0\n"}
			return w
		}, []string{"into a .dist-info"}},
		{"unknown data scheme", func() testWheel {
			w := base()
			w.Files = map[string]string{"evil-1.0.data/lib64/x.py": ""}
			return w
		}, []string{"unknown .data scheme"}},
		{"duplicate after relocation", func() testWheel {
			w := base()
			w.Files = map[string]string{"evil-1.0.data/purelib/evil.py": "a", "evil.py": "b"}
			return w
		}, []string{"installed twice"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := c.wheel()
			wh := open(t, house(t, []testWheel{w}, nil), allowAll)
			_, err := wh.Resolve(bg, "evil", "")
			e := wantErr(t, err, ErrBadWheel, append([]string{w.fileName()}, c.words...)...)
			if e != nil && !slices.Equal(e.Files, []string{w.fileName()}) {
				t.Errorf("Files = %v", e.Files)
			}
		})
	}
}

func TestBadWheelFiles(t *testing.T) {
	dir := t.TempDir()
	good := testWheel{Name: "evil", Version: "1.0"}.bytes()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("evil-1.0-py3-none-any.whl", []byte("this is not a zip"))
	write("evil-2.0-py3-none-any.whl", good[:len(good)/2]) // truncated
	write("evil-3.0-py3-none-any.whl", good)               // says 3.0, holds 1.0
	write("evil-4.0-py3-none-any.whl", testWheel{Name: "evil", Version: "4.0", WheelFile: "Wheel-Version: 2.0\n"}.bytes())
	write("evil-5.0-py3-none-any.whl", testWheel{Name: "evil", Version: "5.0", WheelFile: "Generator: x\n"}.bytes())
	wh := open(t, dir, allowAll)
	for spec, word := range map[string]string{"==1.0": "zip", "==2.0": "zip", "==3.0": "METADATA says evil 1.0", "==4.0": "unsupported Wheel-Version", "==5.0": "no Wheel-Version"} {
		_, err := wh.Resolve(bg, "evil", spec)
		wantErr(t, err, ErrBadWheel, word)
	}
}

func TestDataDirectories(t *testing.T) {
	w := testWheel{Name: "datapkg", Version: "1.0", Files: map[string]string{
		"datapkg/__init__.py":                      "",
		"datapkg-1.0.data/purelib/datapkg/pure.py": "pure = True\n",
		"datapkg-1.0.data/platlib/plat.py":         "plat = True\n",
		"datapkg-1.0.data/scripts/datapkg-cli":     "#!python\n",
		"datapkg-1.0.data/headers/datapkg.h":       "",
		"datapkg-1.0.data/data/share/x.json":       "{}",
	}}
	wh := open(t, house(t, []testWheel{w}, nil), allowAll)
	p, err := wh.Resolve(bg, "datapkg", "")
	if err != nil {
		t.Fatal(err)
	}
	var layer MemLayer
	inst, err := p.Install(bg, &layer)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"datapkg-1.0.dist-info/INSTALLER", "datapkg-1.0.dist-info/METADATA", "datapkg-1.0.dist-info/RECORD",
		"datapkg-1.0.dist-info/WHEEL", "datapkg/__init__.py", "datapkg/pure.py", "plat.py",
	}
	if got := layer.Paths(); !slices.Equal(got, want) {
		t.Errorf("layer = %v\nwant %v", got, want)
	}
	if len(inst[0].Skipped) != 3 || !strings.Contains(strings.Join(inst[0].Skipped, "\n"), "scripts are not installed") {
		t.Errorf("Skipped = %v", inst[0].Skipped)
	}
	record, _ := layer.ReadFile("datapkg-1.0.dist-info/RECORD")
	if !strings.Contains(string(record), "datapkg/pure.py,sha256=") || strings.Contains(string(record), ".data/") {
		t.Errorf("RECORD not rewritten for the installed paths:\n%s", record)
	}
	// The rewritten RECORD verifies what was installed.
	files := map[string][]byte{}
	for _, p := range layer.Paths() {
		files[p], _ = layer.ReadFile(p)
	}
	if err := checkRecord(record, files, "datapkg-1.0.dist-info"); err != nil {
		t.Errorf("installed RECORD: %v", err)
	}
}

func TestUnpackCachedOnce(t *testing.T) {
	salt := fmt.Sprint(time.Now().UnixNano()) // content not unpacked before, even with -count
	data := testWheel{Name: "cached-once", Version: "1.0", Files: map[string]string{"cached_once.py": salt}}.bytes()
	sum := sha256.Sum256(data)
	before := unpackCount.Load()
	u1, err1 := unpackCached(sum, data, DefaultMaxUnpackedSize)
	u2, err2 := unpackCached(sum, data, DefaultMaxUnpackedSize)
	if err1 != nil || err2 != nil || u1 != u2 {
		t.Fatalf("%v %v %p %p", err1, err2, u1, u2)
	}
	if n := unpackCount.Load() - before; n != 1 {
		t.Errorf("unpacked %d times", n)
	}
	bad := []byte("not a zip at all")
	_, err1 = unpackCached(sha256.Sum256(bad), bad, DefaultMaxUnpackedSize)
	_, err2 = unpackCached(sha256.Sum256(bad), bad, DefaultMaxUnpackedSize)
	if err1 == nil || !errors.Is(err2, err1) && err1.Error() != err2.Error() {
		t.Errorf("errors: %v, %v", err1, err2)
	}
}

// TestZipEntryTypes covers directory entries and non-regular modes written by other zip tools.
func TestZipEntryTypes(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "x-1.0.dist-info/"}
	h.SetMode(fs.ModeDir | 0o755)
	zw.CreateHeader(h)
	h = &zip.FileHeader{Name: "fifo"}
	h.SetMode(fs.ModeNamedPipe | 0o644)
	zw.CreateHeader(h)
	zw.Close()
	if _, err := unpack(buf.Bytes(), DefaultMaxUnpackedSize); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("fifo: %v", err)
	}
}
