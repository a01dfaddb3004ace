package vfs

import (
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// checkBounds walks f and fails if an entry breaks MaxDepth or MaxPathLen, or if a directory's cached bounds
// are below the truth (they may only overestimate, and only when stale).
func checkBounds(t testing.TB, f *FS) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var rec func(n *node, path string, depth int) (h, e int)
	rec = func(n *node, path string, depth int) (int, int) {
		if depth > MaxDepth || len(path) > MaxPathLen {
			t.Fatalf("entry at depth %d, path length %d", depth, len(path))
		}
		h, e := 0, 0
		for name, c := range n.children {
			p := name
			if path != "" {
				p = path + "/" + name
			}
			ch, ce := 1, len(name)
			if c.isDir() {
				sh, se := rec(c, p, depth+1)
				ch += sh
				ce += below(se)
			} else if depth+1 > MaxDepth || len(p) > MaxPathLen {
				t.Fatalf("file %d deep, path length %d", depth+1, len(p))
			}
			h, e = max(h, ch), max(e, ce)
		}
		if n.height < h || n.extent < e || !n.stale && (n.height != h || n.extent != e) {
			t.Fatalf("%q: cached height/extent %d/%d (stale %v), true %d/%d", path, n.height, n.extent, n.stale, h, e)
		}
		return h, e
	}
	rec(f.root, "", 0)
}

// chain makes depth nested directories named name under parent ("" for the root) and returns the deepest path.
func chain(t testing.TB, f *FS, parent, name string, depth int) string {
	t.Helper()
	p := parent
	for i := 0; i < depth; i++ {
		if p == "" {
			p = name
		} else {
			p += "/" + name
		}
		errnoOK(t, "mkdir "+p[max(0, len(p)-40):], f.Mkdir(p, 0o755))
	}
	return p
}

func TestDepthBoundOnCreate(t *testing.T) {
	f := New(Limits{MaxFiles: 1000})
	deep := chain(t, f, "", "d", MaxDepth)
	if errno := f.Mkdir(deep+"/x", 0o755); errno != sys.ENAMETOOLONG {
		t.Errorf("mkdir past MaxDepth: %v", errno)
	}
	if _, errno := f.OpenFile(deep+"/x", sys.O_CREAT|sys.O_WRONLY, 0o644); errno != sys.ENAMETOOLONG {
		t.Errorf("create past MaxDepth: %v", errno)
	}
	if err := f.WriteFile(deep+"/x", nil, 0o644); err == nil {
		t.Error("host write past MaxDepth accepted")
	}
	checkBounds(t, f)
}

// The attack: trees nested bottom-up through renames (every path short), then the result moved under a
// directory whose path is already near 4 KB. On main this built chains thousands of levels deep.
func TestRenameCannotBuildDeepTrees(t *testing.T) {
	f := New(Limits{MaxFiles: 10_000})
	name240 := strings.Repeat("n", 240)
	deepDir := chain(t, f, "", name240, 16) // 16*241-1 = 3855 bytes
	refused := 0
	errnoOK(t, "mkdir acc", f.Mkdir("acc", 0o755))
	accBottom := chain(t, f, "acc", "a", 14)
	for i := 0; i < 30; i++ {
		bottom := chain(t, f, "", "t", 15)
		errno := f.Rename(accBottom[:3], bottom+"/acc") // the accumulated tree goes under the new one
		switch errno {
		case 0:
			errnoOK(t, "rename back", f.Rename("t", "acc"))
			accBottom = "acc" + bottom[1:] + "/acc" + accBottom[3:]
		case sys.ENAMETOOLONG:
			refused++
			errnoOK(t, "cleanup", removeAll(f, "t"))
		default:
			t.Fatalf("rename %d: %v", i, errno)
		}
		checkBounds(t, f)
	}
	if refused == 0 {
		t.Fatal("nesting trees by rename was never refused")
	}
	// Moving what was built under the 4 KB-deep directory breaks MaxPathLen.
	if errno := f.Rename("acc", deepDir+"/acc"); errno != sys.ENAMETOOLONG {
		t.Fatalf("rename of a %d-deep tree under a %d-byte path: %v", strings.Count(accBottom, "/"), len(deepDir), errno)
	}
	// A small tree still fits there.
	chain(t, f, "", "s", 3)
	errnoOK(t, "small rename", f.Rename("s", deepDir+"/s"))
	checkBounds(t, f)
}

// Removing the deep part of a tree makes its cached bounds stale; a rename that now fits must succeed.
func TestRenameAfterShrinking(t *testing.T) {
	f := New(Limits{MaxFiles: 1000})
	deep := chain(t, f, "", "d", 200)
	bottom := chain(t, f, "", "t", 100)
	if errno := f.Rename("t", deep+"/t"); errno != sys.ENAMETOOLONG {
		t.Fatalf("300 levels: %v", errno)
	}
	// Cut t down to 10 levels: its cached height is stale (100).
	cut := bottom[:len("t")+2*9]
	errnoOK(t, "remove", removeAll(f, cut+"/t"))
	errnoOK(t, "rename", f.Rename("t", deep+"/t"))
	checkBounds(t, f)
	// A file with a long name counts in the path bound too.
	long := strings.Repeat("x", 255)
	g := New(Limits{MaxFiles: 1000})
	gdeep := chain(t, g, "", long, 15) // 15*256-1 = 3839 bytes
	errnoOK(t, "mkdir m", g.Mkdir("m", 0o755))
	h, errno := g.OpenFile("m/"+long, sys.O_CREAT|sys.O_WRONLY, 0o644)
	errnoOK(t, "create", errno)
	h.Close()
	if errno := g.Rename("m", gdeep+"/m"); errno != sys.ENAMETOOLONG {
		t.Fatalf("path over %d bytes: %v", MaxPathLen, errno)
	}
	errnoOK(t, "unlink", g.Unlink("m/"+long))
	errnoOK(t, "rename after unlink", g.Rename("m", gdeep+"/m"))
	checkBounds(t, g)
}

func removeAll(f *FS, p string) sys.Errno {
	st, errno := f.Stat(p)
	if errno != 0 {
		return errno
	}
	if !st.Mode.IsDir() {
		return f.Unlink(p)
	}
	for _, i := range listDir(f, p) {
		if errno := removeAll(f, p+"/"+i); errno != 0 {
			return errno
		}
	}
	return f.Rmdir(p)
}

func listDir(f *FS, p string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, _, _ := f.resolve(p)
	return sortedNames(n)
}

// maxTree fills f with about files entries whose paths are all close to MaxPathLen: a 255-deep chain of 15-byte
// names, and files with long names at its bottom.
func maxTree(t testing.TB, f *FS, files int) {
	t.Helper()
	deep := chain(t, f, "", strings.Repeat("c", 14), 255) // 255*15-1 = 3824 bytes
	for i := 0; len(deep)+1+200 <= MaxPathLen && i < files-255; i++ {
		name := strings.Repeat("f", 190) + strings.Repeat("0", 10-len(itoa(i))) + itoa(i)
		h, errno := f.OpenFile(deep+"/"+name, sys.O_CREAT|sys.O_WRONLY, 0o644)
		errnoOK(t, "create", errno)
		h.Close()
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Mark and a capped Changes must not build every full path of a tree: on a full default-quota tree whose paths
// are all near 4 KB (about 40 MB of paths), Mark costs a small struct per entry and ChangesN(1000) about 1000
// paths. The bounds are generous (several times the expected cost) but far below the materialised paths.
func TestChangeTrackingMemoryIsBounded(t *testing.T) {
	f := New(Limits{})
	maxTree(t, f, DefaultMaxFiles)
	_, files := f.Usage()
	if files < DefaultMaxFiles-10 {
		t.Fatalf("tree has %d entries", files)
	}
	allPaths := uint64(files) * 4000
	markCost := allocated(f.Mark)
	if markCost > uint64(files)*1024 {
		t.Errorf("Mark allocated %d bytes for %d entries (all paths: %d)", markCost, files, allPaths)
	}
	// Everything changed: delete the files and make new ones.
	f.Mark()
	g := f.Clone()
	g.Mark()
	errnoOK(t, "rename", g.Rename(strings.Repeat("c", 14), "moved"))
	var cs []Change
	var total int
	cost := allocated(func() { cs, total = g.ChangesN(1000) })
	if len(cs) != 1000 || total < 2*(files-1) {
		t.Fatalf("ChangesN(1000): %d listed, %d total; want 1000 and ~%d", len(cs), total, 2*files)
	}
	if limit := uint64(1000*(MaxPathLen+256) + files*512); cost > limit {
		t.Errorf("ChangesN(1000) allocated %d bytes, want <= %d (all paths: %d)", cost, limit, allPaths)
	}
	t.Logf("entries %d: Mark %d bytes, ChangesN(1000) %d bytes, all paths %d bytes", files, markCost, cost, allPaths)
}
