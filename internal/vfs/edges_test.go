package vfs

import (
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// The bounds at exactly their limit (mutation testing showed that a bound moved by one survived the other tests):
// a path of MaxPathLen bytes and a tree reaching MaxDepth are accepted, one more is refused, whether built by
// creating or moved in by a rename.
func TestBoundsAtTheirLimit(t *testing.T) {
	name240 := strings.Repeat("n", 240)
	create := func(f *FS, p string) sys.Errno {
		h, errno := f.OpenFile(p, sys.O_CREAT|sys.O_WRONLY, 0o644)
		if errno == 0 {
			h.Close()
		}
		return errno
	}

	// Creating: 16 directories of 240 bytes are 3855 bytes; a 240-byte name after them makes 4096.
	f := New(Limits{MaxFiles: 1000})
	deep := chain(t, f, "", name240, 16)
	if p := deep + "/" + name240; len(p) != MaxPathLen || create(f, p) != 0 {
		t.Errorf("a path of exactly MaxPathLen (%d) bytes refused", len(p))
	}
	if p := deep + "/x" + name240; len(p) != MaxPathLen+1 || create(f, p) != sys.ENAMETOOLONG {
		t.Errorf("a path of MaxPathLen+1 bytes accepted")
	}
	checkBounds(t, f)

	// Renaming a directory whose deepest file makes the path exactly MaxPathLen: 3855 + "/m/" + 238 = 4096.
	for _, tc := range []struct {
		nameLen int
		want    sys.Errno
	}{{238, 0}, {239, sys.ENAMETOOLONG}} {
		g := New(Limits{MaxFiles: 1000})
		gdeep := chain(t, g, "", name240, 16)
		errnoOK(t, "mkdir m", g.Mkdir("m", 0o755))
		errnoOK(t, "create", create(g, "m/"+strings.Repeat("f", tc.nameLen)))
		if errno := g.Rename("m", gdeep+"/m"); errno != tc.want {
			t.Errorf("rename to a %d-byte path: %v, want %v", len(gdeep)+3+tc.nameLen, errno, tc.want)
		}
		checkBounds(t, g)
	}

	// Renaming a tree whose bottom lands exactly at MaxDepth: 200 levels + a 56-level chain = 256.
	for _, tc := range []struct {
		levels int
		want   sys.Errno
	}{{MaxDepth - 200, 0}, {MaxDepth - 199, sys.ENAMETOOLONG}} {
		h := New(Limits{MaxFiles: 1000})
		hdeep := chain(t, h, "", "d", 200)
		chain(t, h, "", "t", tc.levels)
		if errno := h.Rename("t", hdeep+"/t"); errno != tc.want {
			t.Errorf("rename of a %d-level tree under depth 200: %v, want %v", tc.levels, errno, tc.want)
		}
		checkBounds(t, h)
	}

	// A file at exactly MaxDepth, and one past it.
	k := New(Limits{MaxFiles: 1000})
	kdeep := chain(t, k, "", "d", MaxDepth-1)
	if errno := create(k, kdeep+"/f"); errno != 0 {
		t.Errorf("a file at depth MaxDepth: %v", errno)
	}
	errnoOK(t, "mkdir at MaxDepth", k.Mkdir(kdeep+"/e", 0o755))
	if errno := create(k, kdeep+"/e/g"); errno != sys.ENAMETOOLONG {
		t.Errorf("a file past MaxDepth: %v, want ENAMETOOLONG", errno)
	}
}
