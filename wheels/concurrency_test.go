package wheels

import (
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

// TestConcurrentHammer resolves and installs from many goroutines at once, through several Wheelhouses over one
// directory, into private and shared layers while others read them. Run it with -race. Every wheel is unpacked
// once in the process.
func TestConcurrentHammer(t *testing.T) {
	salt := fmt.Sprint(time.Now().UnixNano()) // content no other test has unpacked
	tws := []testWheel{
		{Name: "hammer", Version: "1.0", Requires: []string{"hammer-dep>=1"}, Files: map[string]string{"hammer/__init__.py": salt}},
		{Name: "hammer-dep", Version: "1.0", Files: map[string]string{"hammer_dep.py": salt}},
		{Name: "hammer-dep", Version: "2.0", Files: map[string]string{"hammer_dep.py": salt + "2"}},
	}
	dir := house(t, tws, nil)
	houses := []*Wheelhouse{open(t, dir, allowAll), open(t, dir, allowAll), open(t, dir, allowAll)}
	shared := new(MemLayer)
	sharedVFS := vfs.New(vfs.Limits{})
	before := unpackCount.Load()

	const workers = 24
	var wg sync.WaitGroup
	errs := make(chan error, workers*4)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wh := houses[i%len(houses)]
			p, err := wh.Resolve(bg, "hammer", "")
			if err != nil {
				errs <- err
				return
			}
			if got := planOf(p); !slices.Equal(got, []string{"hammer-dep==2.0", "hammer==1.0"}) {
				errs <- fmt.Errorf("plan %v", got)
			}
			private := new(MemLayer)
			for _, l := range []Layer{private, shared, sharedVFS} {
				if _, err := p.Install(bg, l); err != nil {
					errs <- err
				}
			}
			if n := len(private.Paths()); n != 10 {
				errs <- fmt.Errorf("private layer has %d files", n)
			}
			// Readers of the shared layer, while others write to it.
			_ = fs.WalkDir(shared, ".", func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					_, err = fs.ReadFile(shared, p)
				}
				return err
			})
			_ = sharedVFS.List()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := unpackCount.Load() - before; n != 2 {
		t.Errorf("unpacked %d times, want 2 (once per wheel used)", n)
	}
	if n := len(shared.Paths()); n != 10 {
		t.Errorf("shared layer has %d files", n)
	}
}
