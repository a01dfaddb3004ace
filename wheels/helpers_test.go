package wheels

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testWheel describes a wheel for a test to build: the machine has no PyPI, so tests make their own.
type testWheel struct {
	Name, Version  string
	Tag            string            // "py3-none-any" if empty
	Build          string            // build tag, optional
	Requires       []string          // Requires-Dist
	RequiresPython string            // Requires-Python
	Extras         []string          // Provides-Extra
	Files          map[string]string // path → content; {<module>/__init__.py} if nil
	Description    string            // METADATA's body, after the headers ("A test package." if empty)
	Headers        string            // extra METADATA header lines, before the body
	RecordPad      string            // appended to RECORD

	// Ways to make it bad.
	FileName       string            // file name override
	NoMetadata     bool              // leave METADATA out
	NoRecordFor    []string          // leave these paths out of RECORD
	RecordOverride map[string]string // path → the RECORD line to write instead
	MetadataName   string            // Name: in METADATA, if different
	WheelFile      string            // the WHEEL file, if not the usual
	Raw            []rawEntry        // extra zip entries, not in RECORD
}

type rawEntry struct {
	name string
	data string
	mode os.FileMode // 0: a regular file
}

var escapeRun = regexp.MustCompile(`[-_.]+`)

func (tw testWheel) distInfo() string {
	return escapeRun.ReplaceAllString(tw.Name, "_") + "-" + tw.Version + ".dist-info"
}

func (tw testWheel) fileName() string {
	if tw.FileName != "" {
		return tw.FileName
	}
	tag := tw.Tag
	if tag == "" {
		tag = "py3-none-any"
	}
	if tw.Build != "" {
		tag = tw.Build + "-" + tag
	}
	return escapeRun.ReplaceAllString(tw.Name, "_") + "-" + tw.Version + "-" + tag + ".whl"
}

func recordLine(p string, data []byte) string {
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%s,sha256=%s,%d", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(data))
}

// bytes builds the wheel.
func (tw testWheel) bytes() []byte {
	files := tw.Files
	if files == nil {
		mod := strings.ReplaceAll(Normalize(tw.Name), "-", "_")
		files = map[string]string{mod + "/__init__.py": fmt.Sprintf("__version__ = %q\n", tw.Version)}
	}
	di := tw.distInfo()
	name := tw.Name
	if tw.MetadataName != "" {
		name = tw.MetadataName
	}
	var meta strings.Builder
	fmt.Fprintf(&meta, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, tw.Version)
	if tw.RequiresPython != "" {
		fmt.Fprintf(&meta, "Requires-Python: %s\n", tw.RequiresPython)
	}
	for _, e := range tw.Extras {
		fmt.Fprintf(&meta, "Provides-Extra: %s\n", e)
	}
	for _, r := range tw.Requires {
		fmt.Fprintf(&meta, "Requires-Dist: %s\n", r)
	}
	meta.WriteString(tw.Headers)
	if tw.Description == "" {
		tw.Description = "A test package.\n"
	}
	meta.WriteString("\n" + tw.Description)
	all := map[string]string{}
	for p, c := range files {
		all[p] = c
	}
	if !tw.NoMetadata {
		all[di+"/METADATA"] = meta.String()
	}
	all[di+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: wasmbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	if tw.WheelFile != "" {
		all[di+"/WHEEL"] = tw.WheelFile
	}
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range all {
			if !yield(p) {
				return
			}
		}
	})
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, p := range paths {
		w, err := zw.Create(p)
		if err != nil {
			panic(err)
		}
		w.Write([]byte(all[p]))
		if l, ok := tw.RecordOverride[p]; ok {
			record.WriteString(l + "\n")
		} else if !slices.Contains(tw.NoRecordFor, p) {
			record.WriteString(recordLine(p, []byte(all[p])) + "\n")
		}
	}
	record.WriteString(di + "/RECORD,,\n" + tw.RecordPad)
	w, _ := zw.Create(di + "/RECORD")
	w.Write([]byte(record.String()))
	for _, r := range tw.Raw {
		h := &zip.FileHeader{Name: r.name, Method: zip.Deflate}
		if r.mode != 0 {
			h.SetMode(r.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			panic(err)
		}
		w.Write([]byte(r.data))
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// house writes the wheels (and other files: name → content) into a new directory.
func house(t testing.TB, wheels []testWheel, other map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, tw := range wheels {
		if err := os.WriteFile(filepath.Join(dir, tw.fileName()), tw.bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for n, c := range other {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func open(t testing.TB, dir string, opts Options) *Wheelhouse {
	t.Helper()
	wh, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return wh
}

// planOf lists a plan as "name==version" strings in install order.
func planOf(p *Plan) []string {
	var out []string
	for _, w := range p.Wheels() {
		out = append(out, w.Project+"=="+w.Version)
	}
	return out
}

// wantErr checks that err matches kind and mentions every word.
func wantErr(t *testing.T, err, kind error, words ...string) *Error {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("err = %v, want %v", err, kind)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if !strings.HasPrefix(err.Error(), "wheels: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
	var e *Error
	errors.As(err, &e)
	return e
}

var bg = context.Background()

// realWorld is a "tabulate-like" project with a dependency, in two major versions, plus a native and an sdist.
func realWorld() []testWheel {
	return []testWheel{
		{Name: "textfmt", Version: "1.0", Requires: []string{"wcwidthlite>=0.1"},
			Files: map[string]string{"textfmt/__init__.py": "from .table import table\n", "textfmt/table.py": "def table(rows): return rows\n"}},
		{Name: "textfmt", Version: "2.0", Extras: []string{"color"},
			Requires: []string{
				"wcwidthlite>=0.2",
				`colorlite>=1; extra == "color"`,
				`backport-dataclasses; python_version < "3.8"`,
				`winterm; sys_platform == "win32"`,
			},
			Files: map[string]string{"textfmt/__init__.py": "from .table import table\n", "textfmt/table.py": "def table(rows): return rows\n"}},
		{Name: "textfmt", Version: "3.0a1", Requires: []string{"wcwidthlite>=0.2"}},
		{Name: "wcwidthlite", Version: "0.1"},
		{Name: "wcwidthlite", Version: "0.2.1"},
		{Name: "wcwidthlite", Version: "0.3", RequiresPython: ">=3.14"},
		{Name: "colorlite", Version: "1.2"},
	}
}

func sha256File(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", sha256.Sum256(b)), nil
}
