package wheels

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Limits on one wheel, against zip bombs and hostile archives.
const (
	maxWheelSize = 256 << 20 // bytes of the .whl file
	maxEntries   = 100_000   // zip entries
	// DefaultMaxUnpackedSize is the default of Options.MaxUnpackedSize: the bytes of all of a wheel's files,
	// decompressed.
	DefaultMaxUnpackedSize = 512 << 20
	// MaxMetadataFileSize bounds each .dist-info file that is read whole and parsed: METADATA, WHEEL and
	// entry_points.txt. A larger one makes the wheel an ErrBadWheel (real METADATA, long description included,
	// is rarely above 100 KiB).
	MaxMetadataFileSize = 1 << 20
	// MaxRecordFileSize bounds the .dist-info/RECORD file, which lists every file of the wheel with its hash
	// (about 100 bytes a line: 16 MiB is some 160,000 files, more than a wheel may hold).
	MaxRecordFileSize = 16 << 20
)

// parsedFileLimit returns the size limit of an archive path that is parsed into memory, or 0 if it is not one.
func parsedFileLimit(name string) uint64 {
	top, rest, ok := strings.Cut(name, "/")
	if !ok || !strings.HasSuffix(top, ".dist-info") {
		return 0
	}
	switch rest {
	case "METADATA", "WHEEL", "entry_points.txt":
		return MaxMetadataFileSize
	case "RECORD":
		return MaxRecordFileSize
	}
	return 0
}

// installerName is written to the installed .dist-info/INSTALLER (PEP 376).
const installerName = "wasmbox"

// layerFile is one file to write into a layer.
type layerFile struct {
	path string // slash-separated, relative to the layer root
	data []byte
}

// unpacked is a verified wheel, ready to install into any number of layers. It is immutable.
type unpacked struct {
	sha256   string // hex, of the .whl file
	meta     *metadata
	distInfo string      // the .dist-info directory name
	files    []layerFile // package files, sorted by path, then the .dist-info files (written last)
	dirs     []string    // every directory the files need, parents first
	skipped  []string    // notes on .data entries not installed
}

// cacheEntry holds the outcome of unpacking one wheel content: the process-wide cache keeps errors too, since
// the same bytes always give the same error.
type cacheEntry struct {
	once sync.Once
	u    *unpacked
	err  error
}

var (
	unpackCache sync.Map     // cacheKey → *cacheEntry
	unpackCount atomic.Int64 // unpack runs, for tests
)

// cacheKey is a wheel's content and the limit it was unpacked under (the same bytes may fit one Wheelhouse's
// limit and not another's).
type cacheKey struct {
	sum      [sha256.Size]byte
	unpacked int64
}

// unpackCached unpacks and verifies data (whose SHA-256 is sum) once per process and limit; maxUnpacked is the
// bound on its decompressed bytes (> 0).
func unpackCached(sum [sha256.Size]byte, data []byte, maxUnpacked int64) (*unpacked, error) {
	e, _ := unpackCache.LoadOrStore(cacheKey{sum, maxUnpacked}, &cacheEntry{})
	ce := e.(*cacheEntry)
	ce.once.Do(func() {
		unpackCount.Add(1)
		ce.u, ce.err = unpack(data, maxUnpacked)
		if ce.u != nil {
			ce.u.sha256 = fmt.Sprintf("%x", sum)
		}
	})
	return ce.u, ce.err
}

// checkPath refuses archive paths that are not plain relative paths inside the install root.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q contains a NUL byte", p)
	case strings.Contains(p, `\`):
		return fmt.Errorf("path %q contains a backslash", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", p)
	case len(p) >= 2 && p[1] == ':':
		return fmt.Errorf("path %q has a drive letter", p)
	case len(p) > 4096:
		return fmt.Errorf("path %q is too long", p[:64]+"...")
	}
	for c := range strings.SplitSeq(p, "/") {
		switch c {
		case "..":
			return fmt.Errorf("path %q escapes the install root", p)
		case ".", "":
			return fmt.Errorf("path %q is not clean", p)
		}
	}
	return nil
}

// recordHash returns the hash function of a RECORD hash name; md5 and sha1 are refused (PEP 427).
func recordHash(algo string) (hash.Hash, bool) {
	switch strings.ToLower(algo) {
	case "sha256":
		return sha256.New(), true
	case "sha384":
		return sha512.New384(), true
	case "sha512":
		return sha512.New(), true
	}
	return nil, false
}

func recordDigest(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256=" + base64.RawURLEncoding.EncodeToString(s[:])
}

// isSignature reports RECORD's own files, which RECORD does not hash.
func isRecordFile(p, distInfo string) bool {
	switch p {
	case distInfo + "/RECORD", distInfo + "/RECORD.jws", distInfo + "/RECORD.p7s":
		return true
	}
	return false
}

// unpack reads and verifies a wheel: every file must be listed in RECORD with a matching hash (and size), the
// paths must stay inside the root, and there must be exactly one .dist-info with METADATA, WHEEL and RECORD.
//
// Its files decompress to at most maxUnpacked bytes (> 0). The check comes before any decompression: the sizes
// the archive declares are summed first, and each entry is then read only up to its declared size (a stream
// that goes on past it is refused), so a zip bomb costs nothing but its central directory.
func unpack(data []byte, maxUnpacked int64) (*unpacked, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("not a valid zip archive: %w", err)
	}
	if len(zr.File) > maxEntries {
		return nil, fmt.Errorf("too many entries (%d > %d)", len(zr.File), maxEntries)
	}
	limit := uint64(max(maxUnpacked, 0))
	var declared uint64
	for _, f := range zr.File {
		if f.UncompressedSize64 > limit-declared {
			return nil, fmt.Errorf("unpacks to more than %d bytes (by the sizes the archive declares)", limit)
		}
		declared += f.UncompressedSize64
	}
	content := map[string][]byte{}
	var names []string
	distInfos := map[string]bool{}
	budget := limit // what is left to read: the sum of the declared sizes is within it
	for _, f := range zr.File {
		name := f.Name
		mode := f.Mode()
		if mode&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%q is a symbolic link", name)
		}
		if strings.HasSuffix(name, "/") || mode.IsDir() {
			if err := checkPath(strings.TrimSuffix(name, "/")); err != nil {
				return nil, err
			}
			continue
		}
		if err := checkPath(name); err != nil {
			return nil, err
		}
		if !mode.IsRegular() {
			return nil, fmt.Errorf("%q is not a regular file (mode %v)", name, mode)
		}
		if _, dup := content[name]; dup {
			return nil, fmt.Errorf("%q appears twice in the archive", name)
		}
		if lim := parsedFileLimit(name); lim > 0 && f.UncompressedSize64 > lim {
			return nil, fmt.Errorf("%s is %d bytes; the limit for this file is %d", name, f.UncompressedSize64, lim)
		}
		b, err := readEntry(f, budget)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", name, err)
		}
		budget -= uint64(len(b))
		content[name] = b
		names = append(names, name)
		if top, _, ok := strings.Cut(name, "/"); ok && strings.HasSuffix(top, ".dist-info") {
			distInfos[top] = true
		}
	}
	if len(distInfos) != 1 {
		found := slices.Sorted(func(yield func(string) bool) {
			for d := range distInfos {
				if !yield(d) {
					return
				}
			}
		})
		if len(found) == 0 {
			return nil, errors.New("no .dist-info directory")
		}
		return nil, fmt.Errorf("more than one .dist-info directory: %s", strings.Join(found, ", "))
	}
	var distInfo string
	for d := range distInfos {
		distInfo = d
	}
	for _, req := range []string{"METADATA", "WHEEL", "RECORD"} {
		if _, ok := content[distInfo+"/"+req]; !ok {
			return nil, fmt.Errorf("%s/%s is missing", distInfo, req)
		}
	}
	if err := parseWheelFile(content[distInfo+"/WHEEL"]); err != nil {
		return nil, err
	}
	meta, err := parseMetadata(content[distInfo+"/METADATA"])
	if err != nil {
		return nil, err
	}
	// The .dist-info name must be the project's: "{name}-{version}.dist-info".
	stem := strings.TrimSuffix(distInfo, ".dist-info")
	diName, diVer, _ := strings.Cut(stem, "-")
	if Normalize(diName) != Normalize(meta.name) {
		return nil, fmt.Errorf("%s does not match METADATA Name %q", distInfo, meta.name)
	}
	if v, err := parseVersion(diVer); err != nil || compareVersions(v, meta.version) != 0 {
		return nil, fmt.Errorf("%s does not match METADATA Version %q", distInfo, meta.version.raw)
	}
	if err := checkRecord(content[distInfo+"/RECORD"], content, distInfo); err != nil {
		return nil, err
	}

	u := &unpacked{meta: meta, distInfo: distInfo}
	placed := map[string]bool{}
	var pkg, dist []layerFile
	slices.Sort(names)
	for _, name := range names {
		if strings.HasPrefix(name, distInfo+"/") {
			if name != distInfo+"/RECORD" && name != distInfo+"/INSTALLER" {
				dist = append(dist, layerFile{name, content[name]})
			}
			continue
		}
		dst := name
		if top, rest, ok := strings.Cut(name, "/"); ok && strings.HasSuffix(top, ".data") {
			scheme, rel, _ := strings.Cut(rest, "/")
			switch scheme {
			case "purelib", "platlib":
				if rel == "" {
					return nil, fmt.Errorf("%q: a file where the %s directory belongs", name, scheme)
				}
				dst = rel
			case "scripts", "headers", "data":
				u.skipped = append(u.skipped, fmt.Sprintf("%s: not installed (%s are not installed into the sandbox)", name, scheme))
				continue
			default:
				return nil, fmt.Errorf("%q: unknown .data scheme %q", name, scheme)
			}
		} else if !ok && strings.HasSuffix(name, ".data") {
			return nil, fmt.Errorf("%q: a file where a .data directory belongs", name)
		}
		if top, _, _ := strings.Cut(dst, "/"); strings.HasSuffix(top, ".dist-info") {
			return nil, fmt.Errorf("%q would install into a .dist-info directory", name)
		}
		if placed[dst] {
			return nil, fmt.Errorf("%q is installed twice (as %q)", name, dst)
		}
		placed[dst] = true
		pkg = append(pkg, layerFile{dst, content[name]})
	}
	for _, f := range pkg {
		for d := path.Dir(f.path); d != "."; d = path.Dir(d) {
			if placed[d] {
				return nil, fmt.Errorf("%q is both a file and a directory", d)
			}
		}
	}
	slices.SortFunc(pkg, func(a, b layerFile) int { return strings.Compare(a.path, b.path) })
	dist = append(dist, layerFile{distInfo + "/INSTALLER", []byte(installerName + "\n")})
	slices.SortFunc(dist, func(a, b layerFile) int { return strings.Compare(a.path, b.path) })

	// RECORD describes what is installed, as pip rewrites it: relocated .data files under their new paths.
	var rec bytes.Buffer
	w := csv.NewWriter(&rec)
	w.UseCRLF = false
	for _, f := range append(slices.Clone(pkg), dist...) {
		_ = w.Write([]string{f.path, recordDigest(f.data), strconv.Itoa(len(f.data))})
	}
	_ = w.Write([]string{distInfo + "/RECORD", "", ""})
	w.Flush()
	dist = append(dist, layerFile{distInfo + "/RECORD", rec.Bytes()})

	u.files = append(pkg, dist...)
	dirs := map[string]bool{}
	for _, f := range u.files {
		for d := path.Dir(f.path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		u.dirs = append(u.dirs, d)
	}
	slices.Sort(u.dirs) // a parent sorts before its children
	return u, nil
}

// readEntry decompresses one entry: exactly its declared size, which must be within budget, and not a byte more
// (the data must end there, and pass the archive's CRC-32). Memory grows with the bytes that actually arrive, not
// with what the header claims.
func readEntry(f *zip.File, budget uint64) ([]byte, error) {
	n := f.UncompressedSize64
	if n > budget {
		return nil, fmt.Errorf("%d bytes exceed what is left of the unpacked size limit (%d)", n, budget)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	buf.Grow(int(min(n, 1<<20)))
	got, err := io.Copy(&buf, io.LimitReader(rc, int64(n)))
	if err != nil {
		return nil, err
	}
	if uint64(got) != n {
		return nil, fmt.Errorf("ends after %d of its declared %d bytes", got, n)
	}
	var one [1]byte
	switch k, err := io.ReadFull(rc, one[:]); {
	case k > 0:
		return nil, fmt.Errorf("holds more than its declared %d bytes", n)
	case err != io.EOF:
		return nil, err // a CRC-32 mismatch, among others
	}
	return buf.Bytes(), nil
}

// checkRecord verifies RECORD against the archive: every file is listed (RECORD itself and its signatures
// excepted) with a hash that matches, and a size that matches when given; every listed file exists.
func checkRecord(record []byte, content map[string][]byte, distInfo string) error {
	r := csv.NewReader(bytes.NewReader(record))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	listed := map[string]bool{}
	for line := 1; ; line++ {
		row, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("RECORD: %w", err)
		}
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue
		}
		if len(row) != 3 {
			return fmt.Errorf("RECORD line %d: want path,hash,size, got %d fields", line, len(row))
		}
		p, h, size := row[0], row[1], row[2]
		if err := checkPath(p); err != nil {
			return fmt.Errorf("RECORD line %d: %v", line, err)
		}
		if listed[p] {
			return fmt.Errorf("RECORD lists %q twice", p)
		}
		listed[p] = true
		data, ok := content[p]
		if !ok {
			return fmt.Errorf("RECORD lists %q, which is not in the archive", p)
		}
		if h == "" {
			if isRecordFile(p, distInfo) {
				continue
			}
			return fmt.Errorf("RECORD has no hash for %q", p)
		}
		algo, want, ok := strings.Cut(h, "=")
		hf, known := recordHash(algo)
		if !ok || !known {
			return fmt.Errorf("RECORD: unsupported hash %q for %q (want sha256, sha384 or sha512)", algo, p)
		}
		wantSum, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(want, "="))
		if err != nil {
			return fmt.Errorf("RECORD: bad hash encoding for %q: %v", p, err)
		}
		hf.Write(data)
		if subtle.ConstantTimeCompare(hf.Sum(nil), wantSum) != 1 {
			return fmt.Errorf("RECORD: hash mismatch for %q (the file was changed after the wheel was built)", p)
		}
		if size != "" {
			n, err := strconv.ParseInt(size, 10, 64)
			if err != nil || n != int64(len(data)) {
				return fmt.Errorf("RECORD: size mismatch for %q (listed %s, is %d)", p, size, len(data))
			}
		}
	}
	var missing []string
	for p := range content {
		if !listed[p] && !isRecordFile(p, distInfo) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		if len(missing) > 5 {
			missing = append(missing[:5], "...")
		}
		return fmt.Errorf("RECORD does not list %s", strings.Join(missing, ", "))
	}
	return nil
}
