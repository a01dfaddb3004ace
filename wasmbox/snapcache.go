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
	"sync"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/vfs"
)

// Snapshots are saved under <CacheDir>/snapshots so that a new process starts without initialising an
// interpreter: <key>.img is the raw memory, <key>.sp the stack pointer. The key covers everything that shapes the
// initialised memory: the interpreter's code (the bytes that run, not only the SHA-256 it declares), its stdlib
// and time-zone data, the engine, the host's ABI version, the mount layout, the prepare source (run driver, tools module,
// preloads), the randomness and clock of a deterministic sandbox, and the installed packages (every path, mode
// and content). A key that cannot be computed means no saved snapshot is read or written. The files are trusted
// like the compilation cache next to them, which holds native code: keep CacheDir private to the user.
const snapshotFormat = "wasmbox-snapshot-v2"

// snapshotKey returns the saved-snapshot key of a sandbox whose prepare source is prep, or "" if it cannot be
// computed (then the cache is not used).
func (s *Sandbox) snapshotKey(prep string) string {
	arts, err := s.artifactsID()
	if err != nil {
		s.cfg.Logger.Debug("snapshot cache not used", "error", err)
		return ""
	}
	h := sha256.New()
	field := func(b []byte) { fmt.Fprintf(h, "%d:", len(b)); h.Write(b) } // length-prefixed: unambiguous
	field([]byte(snapshotFormat))
	field([]byte(s.it.sha256))
	field([]byte(arts))
	field([]byte(s.it.engine))
	field([]byte(strconv.Itoa(int(hostfuncs.ABIVersion))))
	field([]byte(guestLayout))
	field([]byte(prep))
	if s.cfg.Deterministic {
		field(fmt.Appendf(nil, "deterministic %d %d", s.cfg.Seed, s.cfg.Time.UnixNano()))
	} else {
		field(nil)
	}
	err = s.packages.Walk(func(fi vfs.FileInfo) error {
		field([]byte(fi.Path))
		field(fmt.Appendf(nil, "%o %d", fi.Mode, fi.Size))
		if fi.IsDir() {
			field(nil)
			return nil
		}
		b, err := s.packages.ReadFile(fi.Path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		field(sum[:])
		return nil
	})
	if err != nil {
		s.cfg.Logger.Debug("snapshot cache not used", "error", err)
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// wasmIDs memoises the SHA-256 of each compiled interpreter's code (an interp lives as long as the process).
var wasmIDs sync.Map // *interp → string

// defaultDataID memoises the stdlib and tzdata hash of the embedded interpreter.
var defaultDataID struct {
	once sync.Once
	id   string
	err  error
}

// artifactsID identifies what the interpreter runs and reads while it initialises: the code of s.it, and the
// stdlib and time-zone zips of the configured interpreter (the embedded one by default).
func (s *Sandbox) artifactsID() (string, error) {
	wasm, ok := wasmIDs.Load(s.it)
	if !ok {
		sum := sha256.Sum256(s.it.wasm)
		wasm, _ = wasmIDs.LoadOrStore(s.it, hex.EncodeToString(sum[:]))
	}
	dataID := func(a *assets.Interpreter) string {
		h := sha256.New()
		fmt.Fprintf(h, "%d:", len(a.Stdlib))
		h.Write(a.Stdlib)
		fmt.Fprintf(h, "%d:", len(a.TZData))
		h.Write(a.TZData)
		return hex.EncodeToString(h.Sum(nil))
	}
	var data string
	if a := s.cfg.Interpreter; a != nil {
		data = dataID(a)
	} else {
		d := &defaultDataID
		d.once.Do(func() {
			a, err := assets.Load()
			if err != nil {
				d.err = fmt.Errorf("%w: %w", ErrInterpreter, err)
				return
			}
			d.id = dataID(a)
		})
		if d.err != nil {
			return "", d.err
		}
		data = d.id
	}
	return wasm.(string) + " " + data, nil
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
	if dir == "" || key == "" {
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
	if dir == "" || key == "" {
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
