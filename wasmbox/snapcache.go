package wasmbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/vfs"
)

// Snapshots are saved under <CacheDir>/snapshots so that a new process starts without initialising an
// interpreter: <key>.img is the raw memory, <key>.sp the stack pointer; the key covers everything that shapes the
// initialised memory (the interpreter, the engine, the prepare source with the tools module and preloads, the
// randomness of a deterministic sandbox, the installed packages). The files are trusted like the compilation
// cache next to them, which holds native code: keep CacheDir private to the user.
const snapshotFormat = "wasmbox-snapshot-v1"

func (s *Sandbox) snapshotKey(prep string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00", snapshotFormat, s.it.sha256, s.it.engine, len(prep))
	h.Write([]byte(prep))
	if s.cfg.Deterministic {
		fmt.Fprintf(h, "\x00deterministic %d %d", s.cfg.Seed, s.cfg.Time.UnixNano())
	}
	_ = s.packages.Walk(func(fi vfs.FileInfo) error {
		fmt.Fprintf(h, "\x00%s %o %d ", fi.Path, fi.Mode, fi.Size)
		if !fi.IsDir() {
			b, err := s.packages.ReadFile(fi.Path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			h.Write(sum[:])
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Sandbox) snapshotDir() string {
	if s.it.cacheDir == "" {
		return ""
	}
	return filepath.Join(s.it.cacheDir, "snapshots")
}

// loadSnapshot returns the saved snapshot for key, or an error if there is none usable.
func (s *Sandbox) loadSnapshot(ctx context.Context, key string) (*snapshot, error) {
	dir := s.snapshotDir()
	if dir == "" {
		return nil, os.ErrNotExist
	}
	spText, err := os.ReadFile(filepath.Join(dir, key+".sp"))
	if err != nil {
		return nil, err
	}
	sp, err := strconv.ParseUint(strings.TrimSpace(string(spText)), 10, 32)
	if err != nil {
		return nil, err
	}
	image, err := engine.NewImageFromFile(filepath.Join(dir, key+".img"))
	if err != nil {
		return nil, err
	}
	if image.Size()%65536 != 0 || image.Size() > uint64(s.cfg.MemoryLimit) {
		_ = image.Close()
		return nil, fmt.Errorf("wasmbox: saved snapshot %s does not fit: %d bytes", key, image.Size())
	}
	mod, err := s.it.snapshotModule(ctx, sp)
	if err != nil {
		_ = image.Close()
		return nil, err
	}
	return &snapshot{mod: mod, image: image}, nil
}

// saveSnapshot writes the snapshot atomically (temporary file, then rename); failures only cost the next process
// an initialisation.
func (s *Sandbox) saveSnapshot(key string, mem []byte, sp uint64) {
	dir := s.snapshotDir()
	if dir == "" {
		return
	}
	write := func(name string, data []byte) error {
		f, err := os.CreateTemp(dir, ".tmp-*")
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), filepath.Join(dir, name))
		}
		if err != nil {
			os.Remove(f.Name())
		}
		return err
	}
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = write(key+".img", mem)
	}
	if err == nil {
		err = write(key+".sp", []byte(strconv.FormatUint(sp, 10)+"\n"))
	}
	if err != nil {
		s.cfg.Logger.Debug("snapshot not saved", "dir", dir, "error", err)
		return
	}
	pruneSnapshots(dir, maxSavedSnapshots)
}

// maxSavedSnapshots bounds the saved snapshots (≈ 20–30 MB each); the least recently written go first.
const maxSavedSnapshots = 16

func pruneSnapshots(dir string, keep int) {
	imgs, _ := filepath.Glob(filepath.Join(dir, "*.img"))
	if len(imgs) <= keep {
		return
	}
	type aged struct {
		path string
		mod  int64
	}
	var all []aged
	for _, p := range imgs {
		if fi, err := os.Stat(p); err == nil {
			all = append(all, aged{p, fi.ModTime().UnixNano()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod > all[j].mod })
	for _, a := range all[min(keep, len(all)):] {
		os.Remove(a.path)
		os.Remove(strings.TrimSuffix(a.path, ".img") + ".sp")
	}
}
