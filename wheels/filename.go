package wheels

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// namePattern is a valid project name (PEP 508 "Names").
var namePattern = regexp.MustCompile(`(?i)^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$`)

var separatorRun = regexp.MustCompile(`[-_.]+`)

// Normalize returns the PEP 503 normalised form of a project name: lower case, with every run of "-", "_" and "."
// replaced by a single "-" ("Foo.Bar_baz" → "foo-bar-baz"). Names are compared, allow-listed and reported in this
// form.
func Normalize(name string) string {
	return strings.ToLower(separatorRun.ReplaceAllString(name, "-"))
}

func validName(name string) bool { return len(name) <= 200 && namePattern.MatchString(name) }

// fileKind classifies a wheelhouse file.
type fileKind int

const (
	kindPure    fileKind = iota + 1 // a wheel CPython 3.13 on wasi can install
	kindNative                      // a wheel with an ABI or a platform: needs native code
	kindOtherPy                     // a pure wheel for other Python versions only (py2-none-any, cp312-none-any)
	kindSdist                       // a source distribution: would need a build
)

// wheelName is a parsed wheel file name (PEP 427, with PEP 491's escaping).
type wheelName struct {
	name     string // as written in the file name
	project  string // normalised
	version  version
	buildNum uint64 // build tag: leading digits
	buildTag string // build tag: the rest
	hasBuild bool
	pyTags   []string
	abiTags  []string
	platTags []string
}

// parseWheelFilename parses "{distribution}-{version}(-{build tag})?-{python tag}-{abi tag}-{platform tag}.whl".
func parseWheelFilename(file string) (wheelName, error) {
	stem, ok := cutSuffixFold(file, ".whl")
	if !ok {
		return wheelName{}, fmt.Errorf("invalid wheel file name %q: no .whl suffix", file)
	}
	parts := strings.Split(stem, "-")
	if len(parts) != 5 && len(parts) != 6 {
		return wheelName{}, fmt.Errorf("invalid wheel file name %q: want name-version[-build]-python-abi-platform.whl", file)
	}
	w := wheelName{name: parts[0]}
	if !validName(w.name) {
		return wheelName{}, fmt.Errorf("invalid wheel file name %q: bad project name %q", file, w.name)
	}
	w.project = Normalize(w.name)
	v, err := parseVersion(parts[1])
	if err != nil || strings.TrimSpace(parts[1]) != parts[1] {
		return wheelName{}, fmt.Errorf("invalid wheel file name %q: bad version %q", file, parts[1])
	}
	w.version = v
	tags := parts[2:]
	if len(parts) == 6 {
		b := parts[2]
		i := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == 0 {
			return wheelName{}, fmt.Errorf("invalid wheel file name %q: build tag %q does not start with a digit", file, b)
		}
		n, err := strconv.ParseUint(b[:i], 10, 64)
		if err != nil {
			return wheelName{}, fmt.Errorf("invalid wheel file name %q: build tag %q too large", file, b)
		}
		w.hasBuild, w.buildNum, w.buildTag = true, n, b[i:]
		tags = parts[3:]
	}
	split := func(t string) ([]string, error) {
		out := strings.Split(t, ".")
		for _, s := range out {
			if s == "" || strings.TrimFunc(s, func(r rune) bool {
				return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
			}) != "" {
				return nil, fmt.Errorf("invalid wheel file name %q: bad tag %q", file, t)
			}
		}
		return out, nil
	}
	if w.pyTags, err = split(tags[0]); err != nil {
		return wheelName{}, err
	}
	if w.abiTags, err = split(tags[1]); err != nil {
		return wheelName{}, err
	}
	if w.platTags, err = split(tags[2]); err != nil {
		return wheelName{}, err
	}
	return w, nil
}

func cutSuffixFold(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || !strings.EqualFold(s[len(s)-len(suffix):], suffix) {
		return s, false
	}
	return s[:len(s)-len(suffix)], true
}

// pythonTagOK reports whether CPython 3.13 accepts a python tag in a wheel without an ABI, as packaging.tags does
// for cp313: py3, py30 … py313 and cp313 (not cp312: a CPython-specific tag names one interpreter version).
func pythonTagOK(t string) bool {
	t = strings.ToLower(t)
	switch t {
	case "py3", "cp313":
		return true
	}
	if minor, ok := strings.CutPrefix(t, "py3"); ok && minor != "" && len(minor) <= 2 && (minor[0] != '0' || minor == "0") {
		n, err := strconv.Atoi(minor)
		return err == nil && n <= 13
	}
	return false
}

// kind classifies the wheel for CPython 3.13 on wasi.
func (w wheelName) kind() fileKind {
	pure := false
	for _, a := range w.abiTags {
		if strings.EqualFold(a, "none") {
			for _, p := range w.platTags {
				if strings.EqualFold(p, "any") {
					pure = true
				}
			}
		}
	}
	if !pure {
		return kindNative
	}
	for _, p := range w.pyTags {
		if pythonTagOK(p) {
			return kindPure
		}
	}
	return kindOtherPy
}

// less orders wheels of one version: a higher build tag first, then by file name (for determinism).
func (w wheelName) buildLess(o wheelName) bool {
	if w.hasBuild != o.hasBuild {
		return !w.hasBuild
	}
	if w.buildNum != o.buildNum {
		return w.buildNum < o.buildNum
	}
	return w.buildTag < o.buildTag
}

// sdistSuffixes are the source distribution formats recognised (for error messages only: they are never built).
var sdistSuffixes = []string{".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip"}

// parseSdistFilename parses "{name}-{version}.tar.gz" and friends; legacy names may contain "-", so the version
// is the longest valid suffix after a "-".
func parseSdistFilename(file string) (project string, v version, ok bool) {
	var stem string
	for _, s := range sdistSuffixes {
		if st, found := cutSuffixFold(file, s); found {
			stem = st
			break
		}
	}
	if stem == "" {
		return "", version{}, false
	}
	for i := 0; i < len(stem); i++ {
		if stem[i] != '-' {
			continue
		}
		name, ver := stem[:i], stem[i+1:]
		if !validName(name) {
			continue
		}
		if v, err := parseVersion(ver); err == nil && strings.TrimSpace(ver) == ver {
			return Normalize(name), v, true
		}
	}
	return "", version{}, false
}
