package vfs_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/experimental/sys"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

// This example seeds a workspace, lets "the guest" (here, direct sys.FS
// calls, as the WASI layer in internal/engine makes them for a workspace
// mounted at /workspace) write to it, and reads back what changed.
func Example() {
	clock := func() time.Time { return time.Unix(1700000000, 0) } // deterministic mode
	ws := vfs.New(vfs.Limits{MaxBytes: 1 << 20, MaxFiles: 100}, vfs.WithClock(clock))
	if err := ws.WriteFile("input/data.csv", []byte("a,b\n1,2\n"), 0o644); err != nil {
		panic(err)
	}

	// What the guest's open("/workspace/out.txt", "w").write(...) amounts to.
	f, errno := ws.OpenFile("out.txt", sys.O_WRONLY|sys.O_CREAT|sys.O_TRUNC, 0o644)
	if errno != 0 {
		panic(errno)
	}
	f.Write([]byte("sum=3\n"))
	f.Close()
	fmt.Println("symlink:", ws.Symlink("/etc/passwd", "evil"))

	for _, c := range ws.Changes() {
		fmt.Println(c.Kind, c.Path, c.Size)
	}
	out, _ := ws.ReadFile("out.txt")
	fmt.Printf("%q\n", out)

	err := ws.WriteFile("huge.bin", make([]byte, 2<<20), 0o644)
	fmt.Println(err, errors.Is(err, vfs.ENOSPC))
	// Output:
	// symlink: operation not permitted
	// created out.txt 6
	// "sum=3\n"
	// vfs: write "huge.bin": no space left on device (workspace byte quota) true
}
