package wheels

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Options configures a Wheelhouse. The zero value is valid and denies every project.
type Options struct {
	// Allow lists the projects that may be installed: every project of a resolved closure, dependencies included,
	// must be on it. Names are compared in their normalised form ("Typing_Extensions" allows
	// "typing-extensions"); the single entry "*" allows every project. Nil or empty denies everything: with the
	// zero Options every Resolve fails with ErrNotAllowed.
	Allow []string
	// Hashes pins wheels by file name (the base name in the wheelhouse) to their SHA-256, in hex, optionally
	// prefixed with "sha256:". A wheelhouse file named SHA256SUMS (the output of sha256sum: "<hex>  <file>" lines)
	// pins files too; a wheel must match every pin it has, or it is refused with ErrHashMismatch.
	Hashes map[string]string
	// RequireHashes refuses any wheel that has no pin (ErrHashMismatch), as pip's --require-hashes does.
	RequireHashes bool
	// MaxUnpackedSize bounds the bytes of one wheel's files, decompressed (a zip bomb is refused, as an
	// ErrBadWheel, before anything is decompressed). Zero means DefaultMaxUnpackedSize (512 MiB); a negative value
	// is an ErrInvalid. The unpacked files are held in memory, and copied into each layer installed from them.
	MaxUnpackedSize int64
}

// SumsFile is the name of the optional hash list in a wheelhouse directory.
const SumsFile = "SHA256SUMS"

// Wheelhouse is an indexed directory of wheels. It is safe for concurrent use.
//
// Open reads the directory listing once; a wheel's content is read, checked against its pins and unpacked on
// first use and kept for the life of the Wheelhouse (and, keyed by its SHA-256, of the process), so files added,
// removed or changed afterwards are not seen: Open the directory again for that. The zero Wheelhouse is an
// empty one that allows nothing (ResolveWith still resolves the interpreter's provided projects on it).
type Wheelhouse struct {
	dir           string
	allowAll      bool
	allow         map[string]bool
	pins          map[string][]pin // file name → pins
	requireHashes bool
	maxUnpacked   int64
	projects      map[string][]*dist // normalised name → files, any order
}

type pin struct {
	hex    string
	source string // "Options.Hashes" or SumsFile
}

// dist is one file of the wheelhouse.
type dist struct {
	file    string
	kind    fileKind
	project string
	version version
	wheel   wheelName // wheels only

	mu   sync.Mutex
	done bool
	u    *unpacked
	err  error
}

// Open indexes the wheelhouse directory dir: its *.whl files (whose names must parse, or Open fails with
// ErrBadWheel), the source distributions next to them (*.tar.gz, *.zip, ...: never built, named by
// ErrNeedsNative) and the optional SHA256SUMS file. Subdirectories and other files are ignored.
//
// # Errors
//
// ErrInvalid for an invalid Options (an allow-list entry that is not a project name, a hash that is not 64 hex
// digits) or a malformed SHA256SUMS; ErrBadWheel for a wheel file name that does not parse; the os error for an
// unreadable directory.
func Open(dir string, opts Options) (*Wheelhouse, error) {
	wh := &Wheelhouse{
		dir:           dir,
		allow:         map[string]bool{},
		pins:          map[string][]pin{},
		requireHashes: opts.RequireHashes,
		maxUnpacked:   opts.MaxUnpackedSize,
		projects:      map[string][]*dist{},
	}
	switch {
	case wh.maxUnpacked == 0:
		wh.maxUnpacked = DefaultMaxUnpackedSize
	case wh.maxUnpacked < 0:
		return nil, newErr(ErrInvalid, "", fmt.Sprintf("Options.MaxUnpackedSize %d is negative", opts.MaxUnpackedSize))
	}
	for _, a := range opts.Allow {
		a = strings.TrimSpace(a)
		if a == "*" {
			wh.allowAll = true
			continue
		}
		if !validName(a) {
			return nil, newErr(ErrInvalid, "", fmt.Sprintf("Options.Allow: %q is not a project name", a))
		}
		wh.allow[Normalize(a)] = true
	}
	for file, h := range opts.Hashes {
		hx, err := parseHex(h)
		if err != nil || file == "" || strings.ContainsAny(file, `/\`) {
			return nil, newErr(ErrInvalid, "", fmt.Sprintf("Options.Hashes[%q] = %q: want a file name and a SHA-256 in hex", file, h))
		}
		wh.pins[file] = append(wh.pins[file], pin{hx, "Options.Hashes"})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wheels: open wheelhouse: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() {
			if e.Type()&os.ModeSymlink == 0 {
				continue
			}
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
				continue
			}
		}
		if name == SumsFile {
			if err := wh.readSums(filepath.Join(dir, name)); err != nil {
				return nil, err
			}
			continue
		}
		if _, ok := cutSuffixFold(name, ".whl"); ok {
			w, err := parseWheelFilename(name)
			if err != nil {
				return nil, &Error{Kind: ErrBadWheel, Files: []string{name}, Msg: "in the wheelhouse", Err: err}
			}
			wh.add(&dist{file: name, kind: w.kind(), project: w.project, version: w.version, wheel: w})
			continue
		}
		if project, v, ok := parseSdistFilename(name); ok {
			wh.add(&dist{file: name, kind: kindSdist, project: project, version: v})
		}
	}
	return wh, nil
}

func (wh *Wheelhouse) add(d *dist) { wh.projects[d.project] = append(wh.projects[d.project], d) }

func parseHex(h string) (string, error) {
	h = strings.ToLower(strings.TrimSpace(h))
	h = strings.TrimPrefix(h, "sha256:")
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("not a SHA-256 in hex")
	}
	return h, nil
}

// readSums reads a sha256sum-style file: "<hex>  <file>" or "<hex> *<file>" lines; blank lines and lines starting
// with "#" are skipped.
func (wh *Wheelhouse) readSums(p string) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("wheels: read %s: %w", SumsFile, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		h, file, ok := strings.Cut(t, " ")
		file = strings.TrimPrefix(strings.TrimLeft(file, " "), "*")
		hx, err := parseHex(h)
		if !ok || err != nil || file == "" {
			return newErr(ErrInvalid, "", fmt.Sprintf("%s line %d: want \"<sha256 hex>  <file name>\"", SumsFile, line))
		}
		wh.pins[file] = append(wh.pins[file], pin{hx, SumsFile})
	}
	if err := sc.Err(); err != nil {
		return newErr(ErrInvalid, "", fmt.Sprintf("%s: %v", SumsFile, err))
	}
	return nil
}

// allowed reports whether the policy allows the (normalised) project.
func (wh *Wheelhouse) allowed(project string) bool { return wh.allowAll || wh.allow[project] }

// Projects returns the normalised names of the projects that the policy allows and that have at least one wheel
// CPython 3.13 can install without native code, sorted. It reads no wheel.
func (wh *Wheelhouse) Projects() []string {
	var out []string
	for p, ds := range wh.projects {
		if !wh.allowed(p) {
			continue
		}
		if slices.ContainsFunc(ds, func(d *dist) bool { return d.kind == kindPure }) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// load reads the wheel (once), verifies its pins, and unpacks it through the process-wide cache. Read errors are
// not remembered, so a later call tries again.
func (wh *Wheelhouse) load(d *dist) (*unpacked, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return d.u, d.err
	}
	data, err := readWheel(filepath.Join(wh.dir, d.file))
	if err != nil {
		if tooBig, ok := err.(errTooBig); ok {
			d.done, d.err = true, &Error{Kind: ErrBadWheel, Project: d.project, Files: []string{d.file}, Msg: d.file, Err: tooBig}
			return nil, d.err
		}
		return nil, fmt.Errorf("wheels: read %s: %w", d.file, err)
	}
	d.done = true
	sum := sha256.Sum256(data)
	got := hex.EncodeToString(sum[:])
	pins := wh.pins[d.file]
	if len(pins) == 0 && wh.requireHashes {
		d.err = &Error{Kind: ErrHashMismatch, Project: d.project, Files: []string{d.file},
			Msg: fmt.Sprintf("%s has no pinned hash and RequireHashes is set (its sha256 is %s)", d.file, got)}
		return nil, d.err
	}
	for _, p := range pins {
		if p.hex != got {
			d.err = &Error{Kind: ErrHashMismatch, Project: d.project, Files: []string{d.file},
				Msg: fmt.Sprintf("%s: sha256 is %s, %s pins %s", d.file, got, p.source, p.hex)}
			return nil, d.err
		}
	}
	u, err := unpackCached(sum, data, wh.maxUnpacked)
	if err != nil {
		d.err = &Error{Kind: ErrBadWheel, Project: d.project, Files: []string{d.file}, Msg: d.file, Err: err}
		return nil, d.err
	}
	if Normalize(u.meta.name) != d.project || compareVersions(u.meta.version, d.version) != 0 {
		d.err = &Error{Kind: ErrBadWheel, Project: d.project, Files: []string{d.file},
			Msg: fmt.Sprintf("%s: the file name says %s %s, METADATA says %s %s", d.file, d.project, d.version, u.meta.name, u.meta.version.raw)}
		return nil, d.err
	}
	d.u = u
	return u, nil
}

type errTooBig struct{ size int64 }

func (e errTooBig) Error() string {
	return fmt.Sprintf("file too large (%d bytes, the limit is %d)", e.size, maxWheelSize)
}

func readWheel(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxWheelSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxWheelSize {
		fi, _ := f.Stat()
		size := int64(len(data))
		if fi != nil {
			size = fi.Size()
		}
		return nil, errTooBig{size}
	}
	return data, nil
}
