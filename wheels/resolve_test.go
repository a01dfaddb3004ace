package wheels

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var allowAll = Options{Allow: []string{"*"}}

func TestResolveRealWorld(t *testing.T) {
	wh := open(t, house(t, realWorld(), nil), Options{Allow: []string{"TextFmt", "wcwidthlite", "colorlite"}})
	cases := []struct {
		name, spec string
		want       []string
	}{
		// The highest final release; wcwidthlite 0.3 needs Python 3.14, so 0.2.1.
		{"textfmt", "", []string{"wcwidthlite==0.2.1", "textfmt==2.0"}},
		{"textfmt", "<2", []string{"wcwidthlite==0.2.1", "textfmt==1.0"}},
		{"textfmt", "~=1.0", []string{"wcwidthlite==0.2.1", "textfmt==1.0"}},
		{"textfmt", "==1.*", []string{"wcwidthlite==0.2.1", "textfmt==1.0"}},
		{"textfmt", "!=2.0", []string{"wcwidthlite==0.2.1", "textfmt==1.0"}},
		{"textfmt>=2", "", []string{"wcwidthlite==0.2.1", "textfmt==2.0"}},
		// A pre-release only when asked for.
		{"textfmt", ">=3.0a1", []string{"wcwidthlite==0.2.1", "textfmt==3.0a1"}},
		{"textfmt", "==3.0a1", []string{"wcwidthlite==0.2.1", "textfmt==3.0a1"}},
		// Extras pull in what they need, and only then.
		{"textfmt[color]", "", []string{"colorlite==1.2", "wcwidthlite==0.2.1", "textfmt==2.0"}},
		{"TextFmt [COLOR]", "==2.0", []string{"colorlite==1.2", "wcwidthlite==0.2.1", "textfmt==2.0"}},
		{"wcwidthlite", "", []string{"wcwidthlite==0.2.1"}},
	}
	for _, c := range cases {
		p, err := wh.Resolve(bg, c.name, c.spec)
		if err != nil {
			t.Errorf("Resolve(%q, %q): %v", c.name, c.spec, err)
			continue
		}
		if got := planOf(p); !slices.Equal(got, c.want) {
			t.Errorf("Resolve(%q, %q) = %v, want %v", c.name, c.spec, got, c.want)
		}
	}
	p, err := wh.Resolve(bg, "textfmt", "")
	if err != nil {
		t.Fatal(err)
	}
	ws := p.Wheels()
	if ws[1].File != "textfmt-2.0-py3-none-any.whl" || ws[1].Name != "textfmt" || len(ws[1].SHA256) != 64 || !slices.Equal(ws[1].Requires, []string{"wcwidthlite"}) {
		t.Errorf("Wheels()[1] = %+v", ws[1])
	}
	if len(p.Cycles()) != 0 {
		t.Errorf("Cycles = %v", p.Cycles())
	}
	if got := wh.Projects(); !slices.Equal(got, []string{"colorlite", "textfmt", "wcwidthlite"}) {
		t.Errorf("Projects = %v", got)
	}
}

func TestResolveMarkersSkipDependencies(t *testing.T) {
	// textfmt 2.0 requires backport-dataclasses for python_version < "3.8" and winterm on win32: neither is in
	// the wheelhouse or on the allow-list, and neither is needed.
	wh := open(t, house(t, realWorld(), nil), Options{Allow: []string{"textfmt", "wcwidthlite"}})
	p, err := wh.Resolve(bg, "textfmt", "==2.0")
	if err != nil {
		t.Fatal(err)
	}
	if got := planOf(p); !slices.Equal(got, []string{"wcwidthlite==0.2.1", "textfmt==2.0"}) {
		t.Errorf("plan = %v", got)
	}
}

func TestResolveNotAllowed(t *testing.T) {
	dir := house(t, realWorld(), nil)
	for _, opts := range []Options{{}, {Allow: []string{}}} { // nil and empty deny everything
		_, err := open(t, dir, opts).Resolve(bg, "textfmt", "")
		e := wantErr(t, err, ErrNotAllowed, "textfmt", "allow-list")
		if e == nil || e.Project != "textfmt" {
			t.Errorf("Error = %+v", e)
		}
	}
	// A dependency that is not allowed fails the whole resolution, naming who required it.
	_, err := open(t, dir, Options{Allow: []string{"textfmt"}}).Resolve(bg, "textfmt", "")
	wantErr(t, err, ErrNotAllowed, "wcwidthlite", "required by textfmt 2.0")
	// Not allowed wins over not found: the policy answers first.
	_, err = open(t, dir, Options{Allow: []string{"textfmt"}}).Resolve(bg, "nosuch", "")
	wantErr(t, err, ErrNotAllowed, "nosuch")
	if _, err := Open(dir, Options{Allow: []string{"not a name"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad allow entry: %v", err)
	}
}

func TestResolveNotFound(t *testing.T) {
	tws := append(realWorld(),
		testWheel{Name: "oldpy", Version: "1.0", Tag: "py2-none-any"},
		testWheel{Name: "needs", Version: "1.0", Requires: []string{"ghost>=1"}},
	)
	wh := open(t, house(t, tws, nil), allowAll)
	_, err := wh.Resolve(bg, "nosuch", "")
	wantErr(t, err, ErrNotFound, "nosuch", "no files")
	_, err = wh.Resolve(bg, "textfmt", ">=4")
	wantErr(t, err, ErrNotFound, "textfmt", ">=4", "1.0, 2.0, 3.0a1")
	_, err = wh.Resolve(bg, "wcwidthlite", ">=0.3")
	wantErr(t, err, ErrNotFound, "wcwidthlite-0.3-py3-none-any.whl requires Python >=3.14")
	_, err = wh.Resolve(bg, "oldpy", "")
	e := wantErr(t, err, ErrNotFound, "other Python versions", "oldpy-1.0-py2-none-any.whl")
	if e == nil || !slices.Equal(e.Files, []string{"oldpy-1.0-py2-none-any.whl"}) {
		t.Errorf("Error = %+v", e)
	}
	_, err = wh.Resolve(bg, "needs", "")
	wantErr(t, err, ErrNotFound, "ghost")
}

func TestResolveNeedsNative(t *testing.T) {
	tws := []testWheel{
		{Name: "numpyish", Version: "2.1.0", Tag: "cp313-cp313-manylinux_2_17_x86_64"},
		{Name: "mixed", Version: "1.0"},
		{Name: "mixed", Version: "2.0", Tag: "cp313-cp313-win_amd64"},
		{Name: "usesnative", Version: "1.0", Requires: []string{"numpyish"}},
	}
	wh := open(t, house(t, tws, map[string]string{"sdistonly-0.5.tar.gz": "not really a tarball", "numpyish-2.1.0.tar.gz": "x"}), allowAll)
	_, err := wh.Resolve(bg, "numpyish", "")
	e := wantErr(t, err, ErrNeedsNative, "numpyish", "cp313-cp313-manylinux", "numpyish-2.1.0.tar.gz", "escalate")
	want := []string{"numpyish-2.1.0-cp313-cp313-manylinux_2_17_x86_64.whl", "numpyish-2.1.0.tar.gz"}
	if e == nil || !slices.Equal(e.Files, want) {
		t.Errorf("Files = %v, want %v", e.Files, want)
	}
	_, err = wh.Resolve(bg, "sdistonly", "")
	wantErr(t, err, ErrNeedsNative, "sdistonly-0.5.tar.gz")
	_, err = wh.Resolve(bg, "usesnative", "")
	wantErr(t, err, ErrNeedsNative, "numpyish")
	// A pure version is preferred to a newer native one ...
	p, err := wh.Resolve(bg, "mixed", "")
	if err != nil || !slices.Equal(planOf(p), []string{"mixed==1.0"}) {
		t.Errorf("mixed: %v %v", p, err)
	}
	// ... unless the request excludes it.
	_, err = wh.Resolve(bg, "mixed", ">=2")
	wantErr(t, err, ErrNeedsNative, "mixed-2.0-cp313-cp313-win_amd64.whl")
	if got := wh.Projects(); !slices.Equal(got, []string{"mixed", "usesnative"}) {
		t.Errorf("Projects = %v", got)
	}
}

func TestResolveConflict(t *testing.T) {
	tws := []testWheel{
		{Name: "app", Version: "1.0", Requires: []string{"lib-a", "lib-b"}},
		{Name: "lib-a", Version: "1.0", Requires: []string{"shared"}},
		{Name: "lib-b", Version: "1.0", Requires: []string{"shared<2"}},
		{Name: "shared", Version: "1.0"},
		{Name: "shared", Version: "2.0"},
	}
	wh := open(t, house(t, tws, nil), allowAll)
	_, err := wh.Resolve(bg, "app", "")
	wantErr(t, err, ErrConflict, "shared", "lib-a 1.0 requires any version", "lib-b 1.0 requires <2", "2.0 was chosen first", "1.0 would satisfy all")
	// Pinning gets out of it.
	p, err := wh.ResolveAll(bg, "app", "shared<2")
	if err != nil {
		t.Fatal(err)
	}
	if got := planOf(p); !slices.Equal(got, []string{"shared==1.0", "lib-a==1.0", "lib-b==1.0", "app==1.0"}) {
		t.Errorf("plan = %v", got)
	}
	// Requests that contradict each other.
	_, err = wh.ResolveAll(bg, "shared>=2", "shared<2")
	wantErr(t, err, ErrNotFound, "shared", ">=2,<2")
	_, err = wh.Resolve(bg, "shared>=2", "<2")
	wantErr(t, err, ErrNotFound, "shared")
}

func TestResolveCycle(t *testing.T) {
	tws := []testWheel{
		{Name: "chicken", Version: "1.0", Requires: []string{"egg"}},
		{Name: "egg", Version: "1.0", Requires: []string{"chicken>=1", "egg[extra]"}, Extras: []string{"extra"}},
		{Name: "farm", Version: "1.0", Requires: []string{"chicken"}},
	}
	wh := open(t, house(t, tws, nil), allowAll)
	p, err := wh.Resolve(bg, "farm", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := planOf(p); !slices.Equal(got, []string{"chicken==1.0", "egg==1.0", "farm==1.0"}) {
		t.Errorf("plan = %v", got)
	}
	if got := p.Cycles(); len(got) != 1 || !slices.Equal(got[0], []string{"chicken", "egg"}) {
		t.Errorf("Cycles = %v", got)
	}
	// A cycle whose second edge conflicts is still a conflict.
	tws[1].Requires = []string{"chicken>=2"}
	_, err = open(t, house(t, tws, nil), allowAll).Resolve(bg, "chicken", "")
	wantErr(t, err, ErrConflict, "chicken", "egg 1.0 requires >=2")
}

func TestResolveBuildTagAndInvalid(t *testing.T) {
	tws := []testWheel{
		{Name: "tagged", Version: "1.0", Files: map[string]string{"tagged.py": "build = None\n"}},
		{Name: "tagged", Version: "1.0", Build: "2", Files: map[string]string{"tagged.py": "build = 2\n"}},
		{Name: "tagged", Version: "1.0", Build: "10", Tag: "py2.py3-none-any", Files: map[string]string{"tagged.py": "build = 10\n"}},
	}
	wh := open(t, house(t, tws, nil), allowAll)
	p, err := wh.Resolve(bg, "tagged", "==1.0")
	if err != nil {
		t.Fatal(err)
	}
	if f := p.Wheels()[0].File; f != "tagged-1.0-10-py2.py3-none-any.whl" {
		t.Errorf("chose %s", f)
	}
	for _, c := range [][2]string{{"tagged", ">=>1"}, {"", ""}, {"tagged; os_name == 'posix'", ""}, {"tagged @ https://x/y.whl", ""}, {"tagged", "1.0"}} {
		if _, err := wh.Resolve(bg, c[0], c[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("Resolve(%q, %q) = %v, want ErrInvalid", c[0], c[1], err)
		}
	}
	if _, err := wh.ResolveAll(bg); !errors.Is(err, ErrInvalid) {
		t.Errorf("ResolveAll() = %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := wh.Resolve(ctx, "tagged", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestHashPinning(t *testing.T) {
	tws := realWorld()
	dir := house(t, tws, nil)
	sum := func(file string) string {
		h, err := sha256File(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	tf, wc, wc3 := "textfmt-2.0-py3-none-any.whl", "wcwidthlite-0.2.1-py3-none-any.whl", "wcwidthlite-0.3-py3-none-any.whl"
	// With RequireHashes every wheel resolution reads must be pinned: wcwidthlite 0.3 is read (and skipped for
	// its Requires-Python) before 0.2.1 is chosen.
	good := Options{Allow: []string{"*"}, RequireHashes: true, Hashes: map[string]string{tf: sum(tf), wc3: sum(wc3), wc: "sha256:" + strings.ToUpper(sum(wc))}}
	if _, err := open(t, dir, good).Resolve(bg, "textfmt", "==2.0"); err != nil {
		t.Fatalf("good pins: %v", err)
	}
	bad := Options{Allow: []string{"*"}, Hashes: map[string]string{tf: sum(tf), wc: strings.Repeat("0", 64)}}
	_, err := open(t, dir, bad).Resolve(bg, "textfmt", "==2.0")
	e := wantErr(t, err, ErrHashMismatch, wc, "Options.Hashes", sum(wc))
	if e == nil || e.Project != "wcwidthlite" || !slices.Equal(e.Files, []string{wc}) {
		t.Errorf("Error = %+v", e)
	}
	// RequireHashes refuses what is not pinned.
	_, err = open(t, dir, Options{Allow: []string{"*"}, RequireHashes: true, Hashes: map[string]string{tf: sum(tf), wc3: sum(wc3)}}).Resolve(bg, "textfmt", "==2.0")
	wantErr(t, err, ErrHashMismatch, wc, "RequireHashes")
	// A SHA256SUMS file in the wheelhouse pins too, in sha256sum's format.
	sums := fmt.Sprintf("# pins\n%s  %s\n%s *%s\n", sum(tf), tf, strings.Repeat("ab", 32), wc)
	if err := os.WriteFile(filepath.Join(dir, SumsFile), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = open(t, dir, allowAll).Resolve(bg, "textfmt", "==2.0")
	wantErr(t, err, ErrHashMismatch, wc, SumsFile)
	// Invalid pins are refused at Open.
	if _, err := Open(dir, Options{Hashes: map[string]string{tf: "abc"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad hash: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SumsFile), []byte("nothex  "+tf+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, allowAll); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad SHA256SUMS: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), allowAll); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "wheels: ") {
		t.Errorf("missing dir: %v", err)
	}
	dir := house(t, nil, map[string]string{"not-a-wheel.whl": "x", "README": "ignored"})
	_, err := Open(dir, allowAll)
	wantErr(t, err, ErrBadWheel, "not-a-wheel.whl")
	// Subdirectories and other files are ignored.
	dir = house(t, []testWheel{{Name: "a", Version: "1"}}, map[string]string{"index.html": "", "notes.txt": ""})
	if err := os.Mkdir(filepath.Join(dir, "sub.whl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := open(t, dir, allowAll).Projects(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Projects = %v", got)
	}
}
