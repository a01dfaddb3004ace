package wheels

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file implements the subset of PEP 440 (versions and version specifiers) that resolution needs, following
// the reference implementation (the packaging project's Version and Specifier).

// versionPattern is PEP 440's canonical pattern (Appendix B), with its permitted alternative spellings.
var versionPattern = regexp.MustCompile(`(?i)^\s*v?` +
	`(?:(?P<epoch>[0-9]+)!)?` +
	`(?P<release>[0-9]+(?:\.[0-9]+)*)` +
	`(?P<pre>[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?` +
	`(?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?))?` +
	`(?P<dev>[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?` +
	`(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?` +
	`\s*$`)

var versionGroups = func() map[string]int {
	m := map[string]int{}
	for i, n := range versionPattern.SubexpNames() {
		if n != "" {
			m[n] = i
		}
	}
	return m
}()

// maxReleaseSegments bounds the release segment so that hostile input cannot make comparisons expensive.
const maxReleaseSegments = 64

// version is a parsed PEP 440 version.
type version struct {
	epoch   uint64
	release []uint64
	pre     int // 0: none; 1, 2, 3: a, b, rc
	preN    uint64
	post    bool
	postN   uint64
	dev     bool
	devN    uint64
	local   []localPart
	raw     string // as written, trimmed
}

type localPart struct {
	num   bool
	n     uint64
	s     string
	digit string // the numeric part as written (for String)
}

// parseVersion parses a PEP 440 version.
func parseVersion(s string) (version, error) {
	m := versionPattern.FindStringSubmatch(s)
	if m == nil || len(s) > 256 {
		return version{}, fmt.Errorf("invalid version %q", s)
	}
	g := func(name string) string { return m[versionGroups[name]] }
	num := func(t string) (uint64, error) {
		if t == "" {
			return 0, nil
		}
		n, err := strconv.ParseUint(t, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid version %q: number too large", s)
		}
		return n, nil
	}
	v := version{raw: strings.TrimSpace(s)}
	var err error
	if v.epoch, err = num(g("epoch")); err != nil {
		return version{}, err
	}
	parts := strings.Split(g("release"), ".")
	if len(parts) > maxReleaseSegments {
		return version{}, fmt.Errorf("invalid version %q: too many release segments", s)
	}
	for _, p := range parts {
		n, err := num(p)
		if err != nil {
			return version{}, err
		}
		v.release = append(v.release, n)
	}
	if l := strings.ToLower(g("pre_l")); l != "" {
		switch l {
		case "a", "alpha":
			v.pre = 1
		case "b", "beta":
			v.pre = 2
		default: // c, rc, pre, preview
			v.pre = 3
		}
		if v.preN, err = num(g("pre_n")); err != nil {
			return version{}, err
		}
	}
	if g("post") != "" {
		v.post = true
		t := g("post_n1")
		if t == "" {
			t = g("post_n2")
		}
		if v.postN, err = num(t); err != nil {
			return version{}, err
		}
	}
	if g("dev") != "" {
		v.dev = true
		if v.devN, err = num(g("dev_n")); err != nil {
			return version{}, err
		}
	}
	if l := g("local"); l != "" {
		for _, p := range strings.FieldsFunc(strings.ToLower(l), func(r rune) bool { return r == '.' || r == '-' || r == '_' }) {
			if n, err := strconv.ParseUint(p, 10, 64); err == nil {
				v.local = append(v.local, localPart{num: true, n: n, digit: strconv.FormatUint(n, 10)})
			} else if strings.Trim(p, "0123456789") == "" {
				return version{}, fmt.Errorf("invalid version %q: number too large", s)
			} else {
				v.local = append(v.local, localPart{s: p})
			}
		}
	}
	return v, nil
}

// String returns the normalised form of v (PEP 440 "Normalization").
func (v version) String() string {
	var b strings.Builder
	if v.epoch != 0 {
		fmt.Fprintf(&b, "%d!", v.epoch)
	}
	for i, r := range v.release {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.FormatUint(r, 10))
	}
	if v.pre != 0 {
		b.WriteString([]string{"", "a", "b", "rc"}[v.pre])
		b.WriteString(strconv.FormatUint(v.preN, 10))
	}
	if v.post {
		fmt.Fprintf(&b, ".post%d", v.postN)
	}
	if v.dev {
		fmt.Fprintf(&b, ".dev%d", v.devN)
	}
	if len(v.local) > 0 {
		b.WriteByte('+')
		for i, p := range v.local {
			if i > 0 {
				b.WriteByte('.')
			}
			if p.num {
				b.WriteString(p.digit)
			} else {
				b.WriteString(p.s)
			}
		}
	}
	return b.String()
}

func (v version) isPrerelease() bool  { return v.pre != 0 || v.dev }
func (v version) isPostrelease() bool { return v.post }

// public returns v without its local segment.
func (v version) public() version {
	v.local = nil
	return v
}

// base returns the epoch and release of v only.
func (v version) base() version {
	return version{epoch: v.epoch, release: v.release}
}

// trimmedRelease drops trailing zeros: 1.0 == 1.0.0.
func trimmedRelease(r []uint64) []uint64 {
	i := len(r)
	for i > 0 && r[i-1] == 0 {
		i--
	}
	return r[:i]
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareVersions orders versions as PEP 440 does: epoch, release, then dev < pre < final < post, locals after
// the public version.
func compareVersions(a, b version) int {
	if c := cmpUint(a.epoch, b.epoch); c != 0 {
		return c
	}
	if c := slices.Compare(trimmedRelease(a.release), trimmedRelease(b.release)); c != 0 {
		return c
	}
	// Pre-release phase: a bare .devN sorts before any pre-release; a final (no pre) after all of them.
	phase := func(v version) (int, uint64) {
		switch {
		case v.pre == 0 && !v.post && v.dev:
			return -1, 0
		case v.pre == 0:
			return 4, 0
		}
		return v.pre, v.preN
	}
	pa, na := phase(a)
	pb, nb := phase(b)
	if c := cmpInt(pa, pb); c != 0 {
		return c
	}
	if c := cmpUint(na, nb); c != 0 {
		return c
	}
	if a.post != b.post {
		if a.post {
			return 1
		}
		return -1
	}
	if c := cmpUint(a.postN, b.postN); c != 0 {
		return c
	}
	if a.dev != b.dev { // a development release sorts before the release it leads to
		if a.dev {
			return -1
		}
		return 1
	}
	if c := cmpUint(a.devN, b.devN); c != 0 {
		return c
	}
	for i := 0; i < len(a.local) && i < len(b.local); i++ {
		x, y := a.local[i], b.local[i]
		switch {
		case x.num && y.num:
			if c := cmpUint(x.n, y.n); c != 0 {
				return c
			}
		case x.num != y.num: // numbers sort after strings
			if x.num {
				return 1
			}
			return -1
		default:
			if c := strings.Compare(x.s, y.s); c != 0 {
				return c
			}
		}
	}
	return cmpInt(len(a.local), len(b.local))
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// clause is one PEP 440 version specifier clause, such as ">=1.2" or "==1.4.*".
type clause struct {
	op        string // ~= == != <= >= < > ===
	v         version
	wildcard  bool   // == or != with a trailing .*
	arbitrary string // the operand of ===
}

// specifier is a comma-separated set of clauses; the empty specifier matches every version.
type specifier []clause

var opPattern = regexp.MustCompile(`^(~=|===|==|!=|<=|>=|<|>)`)

// parseSpecifier parses a PEP 440 version specifier such as ">=1,<2" or "~=1.4". The empty string is the empty
// specifier.
func parseSpecifier(s string) (specifier, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if len(s) > 1024 {
		return nil, fmt.Errorf("invalid version specifier: too long")
	}
	var out specifier
	for _, part := range strings.Split(s, ",") {
		c, err := parseClause(part)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func parseClause(s string) (clause, error) {
	t := strings.TrimSpace(s)
	op := opPattern.FindString(t)
	if op == "" {
		return clause{}, fmt.Errorf("invalid version specifier %q: no operator (one of ==, !=, <, <=, >, >=, ~=, ===)", t)
	}
	rest := strings.TrimSpace(t[len(op):])
	c := clause{op: op}
	if op == "===" {
		if rest == "" || strings.ContainsAny(rest, " \t,;") {
			return clause{}, fmt.Errorf("invalid version specifier %q", t)
		}
		c.arbitrary = rest
		return c, nil
	}
	if (op == "==" || op == "!=") && strings.HasSuffix(rest, ".*") {
		c.wildcard = true
		rest = strings.TrimSuffix(rest, ".*")
	}
	v, err := parseVersion(rest)
	if err != nil {
		return clause{}, fmt.Errorf("invalid version specifier %q: %v", t, err)
	}
	switch {
	case c.wildcard && (v.pre != 0 || v.post || v.dev || len(v.local) > 0):
		return clause{}, fmt.Errorf("invalid version specifier %q: a .* wildcard applies to a release like 1.2 only", t)
	case len(v.local) > 0 && op != "==" && op != "!=":
		return clause{}, fmt.Errorf("invalid version specifier %q: a local version (+...) is only allowed with == and !=", t)
	case op == "~=" && len(v.release) < 2:
		return clause{}, fmt.Errorf("invalid version specifier %q: ~= needs at least two release segments (like ~=1.4)", t)
	}
	c.v = v
	return c, nil
}

func (c clause) String() string {
	switch {
	case c.op == "===":
		return c.op + c.arbitrary
	case c.wildcard:
		return c.op + c.v.String() + ".*"
	}
	return c.op + c.v.String()
}

func (s specifier) String() string {
	parts := make([]string, len(s))
	for i, c := range s {
		parts[i] = c.String()
	}
	return strings.Join(parts, ",")
}

// prefixMatch reports whether v's release, padded with zeros, starts with prefix (the "==1.2.*" rule).
func prefixMatch(v version, epoch uint64, prefix []uint64) bool {
	if v.epoch != epoch {
		return false
	}
	for i, p := range prefix {
		var r uint64
		if i < len(v.release) {
			r = v.release[i]
		}
		if r != p {
			return false
		}
	}
	return true
}

// contains reports whether v satisfies the clause, pre-releases included (filtering pre-releases is the job of
// specifier.filter).
func (c clause) contains(v version) bool {
	switch c.op {
	case "===":
		return strings.EqualFold(v.raw, c.arbitrary)
	case "==":
		return c.equal(v)
	case "!=":
		return !c.equal(v)
	case "~=":
		prefix := c.v.release[:len(c.v.release)-1]
		return compareVersions(v.public(), c.v) >= 0 && prefixMatch(v, c.v.epoch, prefix)
	case "<=":
		return compareVersions(v.public(), c.v) <= 0
	case ">=":
		return compareVersions(v.public(), c.v) >= 0
	case "<":
		if compareVersions(v, c.v) >= 0 {
			return false
		}
		// <3.0 does not match 3.0's own pre-releases (3.0rc1) unless the clause names a pre-release.
		return c.v.isPrerelease() || !v.isPrerelease() || compareVersions(v.base(), c.v.base()) != 0
	case ">":
		if compareVersions(v, c.v) <= 0 {
			return false
		}
		// >1.7 does not match 1.7's post-releases (1.7.post1) unless the clause names one, nor 1.7+local.
		if !c.v.isPostrelease() && v.isPostrelease() && compareVersions(v.base(), c.v.base()) == 0 {
			return false
		}
		return len(v.local) == 0 || compareVersions(v.base(), c.v.base()) != 0
	}
	return false
}

func (c clause) equal(v version) bool {
	if c.wildcard {
		return prefixMatch(v, c.v.epoch, c.v.release)
	}
	if len(c.v.local) == 0 {
		v = v.public()
	}
	return compareVersions(v, c.v) == 0
}

// allowsPrereleases reports whether the specifier explicitly names a pre-release (">=2.0b1", "==1.0rc1"), which
// lets pre-releases match.
func (s specifier) allowsPrereleases() bool {
	for _, c := range s {
		if c.op != "!=" && c.op != "===" && c.v.isPrerelease() {
			return true
		}
	}
	return false
}

// contains reports whether v satisfies every clause, pre-releases included.
func (s specifier) contains(v version) bool {
	for _, c := range s {
		if !c.contains(v) {
			return false
		}
	}
	return true
}
