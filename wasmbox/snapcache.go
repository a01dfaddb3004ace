package wasmbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/starttrace"
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
	starttrace.Mark("snapshot: key (hash artifacts)")
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

// artifactsID identifies what the interpreter runs and reads while it initialises: its code, and its stdlib and
// time-zone zips (verified hashes, or hashes computed when the interpreter came from the caller).
func (s *Sandbox) artifactsID() (string, error) {
	return s.it.codeID + " " + s.it.dataID, nil
}

func (s *Sandbox) snapshotDir() string {
	if s.it.cacheDir == "" {
		return ""
	}
	return filepath.Join(s.it.cacheDir, "snapshots")
}

// loadSnapshot returns the saved snapshot for key, from the precompiled directory or the cache, or an error if
// there is none usable.
func (s *Sandbox) loadSnapshot(ctx context.Context, key string) (*snapshot, error) {
	if key == "" {
		return nil, os.ErrNotExist
	}
	var spPath, imgPath string
	if pre := s.it.precompiled; pre != nil {
		sp, err := pre.file("snapshots/" + key + ".sp")
		if err == nil {
			img, err := pre.file("snapshots/" + key + ".img")
			if err != nil {
				return nil, err
			}
			spPath, imgPath = sp, img
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if dir := s.snapshotDir(); spPath == "" && dir != "" {
		spPath, imgPath = filepath.Join(dir, key+".sp"), filepath.Join(dir, key+".img")
		touch(spPath) // last use, for the cache's size cap
	}
	if spPath == "" {
		return nil, os.ErrNotExist
	}
	spText, err := engine.ReadSmallFile(spPath, maxRecordBytes)
	if err != nil {
		return nil, err
	}
	sp, err := strconv.ParseUint(strings.TrimSpace(string(spText)), 10, 32)
	if err != nil {
		return nil, err
	}
	image, err := engine.NewImageFromFile(imgPath)
	if err != nil {
		return nil, err
	}
	starttrace.Mark("snapshot: map saved image")
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
	write := func(name string, data []byte) error { return engine.WriteFileAtomic(filepath.Join(dir, name), data) }
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
	enforceCacheCap(s.it.cacheDir, s.it.maxBytes, cacheMinAge)
}
