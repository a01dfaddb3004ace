package wheels

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

// Layer is where Install writes: the root of a site-packages directory (the sandbox mounts it read-only at
// /packages, which is on sys.path). Paths are relative and slash-separated. *vfs.FS and *MemLayer satisfy it.
type Layer interface {
	MkdirAll(path string, perm fs.FileMode) error
	WriteFile(path string, data []byte, perm fs.FileMode) error
}

// Installed reports what Install did with one wheel of the plan.
type Installed struct {
	Wheel
	// AlreadyPresent: the layer already had this version of the project, so nothing was written.
	AlreadyPresent bool
	// BuiltIn: the interpreter provides the project (Plan.Provided, from ResolveWith), so nothing was written.
	BuiltIn bool
	// Files are the paths written (package files, then the .dist-info).
	Files []string
	// Skipped notes the wheel's .data entries that are not installed (scripts, headers, data): the sandbox has
	// no bin directory or include path, and nothing outside site-packages.
	Skipped []string
}

// Install writes the plan's wheels into dst, dependencies first: each wheel's files as verified against its
// RECORD (.data/purelib and .data/platlib moved to the root), then its .dist-info with a RECORD rewritten for the
// installed paths and INSTALLER "wasmbox". The plan's provided projects (ResolveWith) come first in the result,
// marked BuiltIn, with nothing written for them. It reads nothing from the wheelhouse: the plan holds the unpacked
// files, and any number of layers can be installed from one plan, concurrently.
//
// Layers are append-only. If dst can be read (it is an fs.FS, such as *MemLayer, or a *vfs.FS), Install first
// checks it: a project already installed at the same version is a no-op (AlreadyPresent), at another version an
// ErrConflict, and so is a file that exists with other content (two projects shipping the same module). These
// checks cover the whole plan before anything is written. A layer that cannot be read is treated as empty.
//
// # Errors
//
// ErrConflict as above; the layer's own error (such as vfs.ENOSPC) wrapped, with the wheels completely
// installed before it returned alongside; the context's error.
func (p *Plan) Install(ctx context.Context, dst Layer) ([]Installed, error) {
	view := viewOf(dst)
	present := map[string]string{}
	if view != nil {
		var err error
		if present, err = installedIn(view); err != nil {
			return nil, fmt.Errorf("wheels: read layer: %w", err)
		}
	}
	out := make([]Installed, len(p.wheels))
	builtin := make([]Installed, len(p.provided))
	for i, w := range p.provided {
		builtin[i] = Installed{Wheel: w, BuiltIn: true}
	}
	same := map[string]bool{} // files the layer already has, with the same content
	for i, w := range p.wheels {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i].Wheel = w.info
		out[i].Requires = append([]string(nil), w.info.Requires...)
		if v, ok := present[w.info.Project]; ok {
			if sameVersion(v, w.u.meta.version) {
				out[i].AlreadyPresent = true
				continue
			}
			return nil, &Error{Kind: ErrConflict, Project: w.info.Project,
				Msg: fmt.Sprintf("the layer already has version %s; cannot install %s (layers are append-only)", v, w.info.Version)}
		}
		if view == nil {
			continue
		}
		for _, f := range w.u.files {
			old, ok, err := view.readFile(f.path)
			if err != nil {
				return nil, fmt.Errorf("wheels: read layer: %w", err)
			}
			if !ok {
				continue
			}
			if !bytes.Equal(old, f.data) {
				return nil, &Error{Kind: ErrConflict, Project: w.info.Project, Files: []string{f.path},
					Msg: fmt.Sprintf("%s from %s is already in the layer with other content (another project ships it?)", f.path, w.info.File)}
			}
			same[f.path] = true
		}
	}
	for i, w := range p.wheels {
		if out[i].AlreadyPresent {
			continue
		}
		for _, d := range w.u.dirs {
			if err := dst.MkdirAll(d, 0o755); err != nil {
				return done(append(builtin, out[:i]...)), fmt.Errorf("wheels: install %s %s: %w", w.info.Name, w.info.Version, err)
			}
		}
		files := make([]string, 0, len(w.u.files))
		for _, f := range w.u.files {
			if err := ctx.Err(); err != nil {
				return done(append(builtin, out[:i]...)), err
			}
			if !same[f.path] {
				if err := dst.WriteFile(f.path, f.data, 0o644); err != nil {
					return done(append(builtin, out[:i]...)), fmt.Errorf("wheels: install %s %s: %w", w.info.Name, w.info.Version, err)
				}
			}
			files = append(files, f.path)
		}
		out[i].Files = files
		out[i].Skipped = append([]string(nil), w.u.skipped...)
	}
	return append(builtin, out...), nil
}

func done(out []Installed) []Installed {
	if len(out) == 0 {
		return nil
	}
	return out
}

func sameVersion(installed string, v version) bool {
	if iv, err := parseVersion(installed); err == nil {
		return compareVersions(iv, v) == 0
	}
	return installed == v.raw
}

// layerView reads a layer, where the layer allows it.
type layerView interface {
	readFile(p string) (data []byte, ok bool, err error)
	topDirs() ([]string, error)
}

func viewOf(l Layer) layerView {
	switch l := l.(type) {
	case fs.FS:
		return fsView{l}
	case *vfs.FS:
		return vfsView{l}
	}
	return nil
}

type fsView struct{ fsys fs.FS }

func (v fsView) readFile(p string) ([]byte, bool, error) {
	b, err := fs.ReadFile(v.fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func (v fsView) topDirs() ([]string, error) {
	es, err := fs.ReadDir(v.fsys, ".")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var out []string
	for _, e := range es {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, err
}

type vfsView struct{ fs *vfs.FS }

func (v vfsView) readFile(p string) ([]byte, bool, error) {
	b, err := v.fs.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func (v vfsView) topDirs() ([]string, error) {
	var out []string
	err := v.fs.Walk(func(fi vfs.FileInfo) error {
		if fi.IsDir() {
			out = append(out, fi.Path)
			return fs.SkipDir
		}
		return nil
	})
	return out, err
}

// installedIn maps the projects that have a complete .dist-info (with its RECORD) at the layer's root to their
// version (from METADATA, or the directory name).
func installedIn(v layerView) (map[string]string, error) {
	dirs, err := v.topDirs()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, d := range dirs {
		stem, ok := strings.CutSuffix(d, ".dist-info")
		if !ok {
			continue
		}
		// RECORD is written last: without it, the install was interrupted, and is not there yet.
		if _, ok, err := v.readFile(d + "/RECORD"); err != nil || !ok {
			continue
		}
		name, ver, _ := strings.Cut(stem, "-")
		if b, ok, err := v.readFile(d + "/METADATA"); err == nil && ok {
			h := parseHeaders(b[:min(len(b), MaxMetadataFileSize)]) // the headers come first
			if n := h.get("name"); n != "" {
				name = n
			}
			if vv := h.get("version"); vv != "" {
				ver = vv
			}
		}
		out[Normalize(name)] = ver
	}
	return out, nil
}
