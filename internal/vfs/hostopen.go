package vfs

import (
	"fmt"
	"io/fs"
	"os"
)

// checkOpenedNotLink is the no-follow check for systems whose open has no
// O_NOFOLLOW (Windows): after f was opened at rel, the entry at rel must not
// be a link or another reparse point (Lstat), and it must be the very file f
// is (SameFile). A link swapped in before the open makes f its target, which
// is not the entry Lstat sees; one swapped in after makes Lstat see the link.
// Either way the file is refused, so a race cannot make us read or write
// through a link. It is portable code, and the tests run it on every system.
func checkOpenedNotLink(root *os.Root, rel string, f *os.File) error {
	lst, err := root.Lstat(rel)
	if err != nil {
		return err
	}
	if lst.Mode()&(fs.ModeSymlink|fs.ModeIrregular) != 0 {
		return fmt.Errorf("%q: %w", rel, ErrHostSymlink)
	}
	fst, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(lst, fst) {
		return fmt.Errorf("%q changed while it was opened: %w", rel, ErrHostSymlink)
	}
	return nil
}
