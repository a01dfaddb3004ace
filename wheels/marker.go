package wheels

import (
	"fmt"
	"regexp"
	"strings"
)

// This file implements PEP 508 dependency specifiers: requirements ("name[extra]>=1.0; marker") and environment
// markers, evaluated for the sandbox's interpreter.

// environment is the marker environment of wasmbox's interpreter (CPython 3.13.5 built for wasm32-wasi), as the
// guest reports it: sys.platform "wasi", os.name "posix", platform.system() "wasi", platform.machine() "wasm32".
var environment = map[string]string{
	"python_version":                 "3.13",
	"python_full_version":            "3.13.5",
	"implementation_name":            "cpython",
	"implementation_version":         "3.13.5",
	"platform_python_implementation": "CPython",
	"os_name":                        "posix",
	"sys_platform":                   "wasi",
	"platform_system":                "wasi",
	"platform_machine":               "wasm32",
	"platform_release":               "0.0.0",
	"platform_version":               "0.0.0",
}

// pythonVersion is the interpreter's version, checked against Requires-Python.
var pythonVersion = func() version {
	v, err := parseVersion(environment["python_full_version"])
	if err != nil {
		panic(err)
	}
	return v
}()

// legacyMarkerNames are the dotted spellings of PEP 345 that old metadata still uses.
var legacyMarkerNames = map[string]string{
	"os.name":                        "os_name",
	"sys.platform":                   "sys_platform",
	"platform.version":               "platform_version",
	"platform.machine":               "platform_machine",
	"platform.python_implementation": "platform_python_implementation",
	"python_implementation":          "platform_python_implementation",
}

// requirement is a parsed PEP 508 dependency specifier.
type requirement struct {
	name   string // as written
	norm   string // normalised
	extras []string
	spec   specifier
	url    string
	marker marker // nil: always applies
	raw    string
}

var reqNamePattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?`)

// maxRequirementLen bounds what the parsers accept.
const maxRequirementLen = 4096

// parseRequirement parses "name [extras] (specifier | @ url) [; marker]".
func parseRequirement(s string) (requirement, error) {
	r := requirement{raw: strings.TrimSpace(s)}
	if len(s) > maxRequirementLen {
		return requirement{}, fmt.Errorf("requirement too long (%d bytes)", len(s))
	}
	rest := strings.TrimSpace(s)
	r.name = reqNamePattern.FindString(rest)
	if r.name == "" {
		return requirement{}, fmt.Errorf("invalid requirement %q: no project name", r.raw)
	}
	r.norm = Normalize(r.name)
	rest = strings.TrimLeft(rest[len(r.name):], " \t")
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return requirement{}, fmt.Errorf("invalid requirement %q: unclosed [", r.raw)
		}
		for _, e := range strings.Split(rest[1:end], ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			if !validName(e) {
				return requirement{}, fmt.Errorf("invalid requirement %q: bad extra %q", r.raw, e)
			}
			r.extras = append(r.extras, Normalize(e))
		}
		rest = strings.TrimLeft(rest[end+1:], " \t")
	}
	var markerText string
	if strings.HasPrefix(rest, "@") {
		// A direct reference: "name @ url [; marker]"; the marker must follow whitespace.
		rest = strings.TrimSpace(rest[1:])
		url := rest
		if i := strings.Index(rest, " ;"); i >= 0 {
			url, markerText = rest[:i], rest[i+2:]
		} else if i := strings.Index(rest, "\t;"); i >= 0 {
			url, markerText = rest[:i], rest[i+2:]
		}
		r.url = strings.TrimSpace(url)
		if r.url == "" {
			return requirement{}, fmt.Errorf("invalid requirement %q: empty URL", r.raw)
		}
	} else {
		specText := rest
		if i := strings.IndexByte(rest, ';'); i >= 0 {
			specText, markerText = rest[:i], rest[i+1:]
		}
		specText = strings.TrimSpace(specText)
		if strings.HasPrefix(specText, "(") {
			if !strings.HasSuffix(specText, ")") {
				return requirement{}, fmt.Errorf("invalid requirement %q: unclosed (", r.raw)
			}
			specText = strings.TrimSpace(specText[1 : len(specText)-1])
		}
		spec, err := parseSpecifier(specText)
		if err != nil {
			return requirement{}, fmt.Errorf("invalid requirement %q: %v", r.raw, err)
		}
		r.spec = spec
	}
	if strings.TrimSpace(markerText) != "" {
		m, err := parseMarker(markerText)
		if err != nil {
			return requirement{}, fmt.Errorf("invalid requirement %q: %v", r.raw, err)
		}
		r.marker = m
	} else if strings.Contains(rest, ";") && r.url == "" {
		return requirement{}, fmt.Errorf("invalid requirement %q: empty marker", r.raw)
	}
	return r, nil
}

// applies reports whether the requirement is needed in the sandbox's environment, with extra set to "" and to
// each of extras in turn.
func (r requirement) applies(extras []string) (bool, error) {
	if r.marker == nil {
		return true, nil
	}
	for _, e := range append([]string{""}, extras...) {
		ok, err := r.marker.eval(e)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// ---- markers ----

type marker interface {
	eval(extra string) (bool, error)
}

type markerAnd struct{ l, r marker }
type markerOr struct{ l, r marker }

type markerCmp struct {
	lhs, rhs operand
	op       string // a version operator, "in" or "not in"
}

type operand struct {
	variable string // the environment variable, or "" for a literal
	literal  string
}

func (m markerAnd) eval(extra string) (bool, error) {
	l, err := m.l.eval(extra)
	if err != nil || !l {
		return false, err
	}
	return m.r.eval(extra)
}

func (m markerOr) eval(extra string) (bool, error) {
	l, err := m.l.eval(extra)
	if err != nil || l {
		return l, err
	}
	return m.r.eval(extra)
}

func (o operand) value(extra string) string {
	switch o.variable {
	case "":
		return o.literal
	case "extra":
		return extra
	}
	return environment[o.variable]
}

func (m markerCmp) eval(extra string) (bool, error) {
	l, r := m.lhs.value(extra), m.rhs.value(extra)
	if m.lhs.variable == "extra" || m.rhs.variable == "extra" {
		// Extras are compared as normalised names (packaging ≥ 22).
		l, r = Normalize(l), Normalize(r)
	}
	switch m.op {
	case "in":
		return strings.Contains(r, l), nil
	case "not in":
		return !strings.Contains(r, l), nil
	}
	// A version comparison when both sides are versions, else a string comparison (as packaging does).
	if c, err := parseClause(m.op + r); err == nil {
		if v, err := parseVersion(l); err == nil {
			return c.contains(v), nil
		}
	}
	switch m.op {
	case "==":
		return l == r, nil
	case "!=":
		return l != r, nil
	case "<":
		return l < r, nil
	case "<=":
		return l <= r, nil
	case ">":
		return l > r, nil
	case ">=":
		return l >= r, nil
	case "===":
		return l == r, nil
	}
	return false, fmt.Errorf("marker: cannot compare %q %s %q", l, m.op, r)
}

// markerParser is a recursive-descent parser for PEP 508's marker grammar.
type markerParser struct {
	toks []string
	pos  int
	src  string
}

// maxMarkerDepth bounds parenthesis nesting.
const maxMarkerDepth = 32

func parseMarker(s string) (marker, error) {
	toks, err := tokenizeMarker(s)
	if err != nil {
		return nil, err
	}
	p := &markerParser{toks: toks, src: strings.TrimSpace(s)}
	m, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("marker %q: unexpected %q", p.src, p.toks[p.pos])
	}
	return m, nil
}

func tokenizeMarker(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '(' || c == ')':
			toks = append(toks, s[i:i+1])
			i++
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("marker %q: unterminated string", s)
			}
			toks = append(toks, s[i:i+j+2])
			i += j + 2
		case strings.IndexByte("<>=!~", c) >= 0:
			j := i
			for j < len(s) && strings.IndexByte("<>=!~", s[j]) >= 0 {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == '.' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			return nil, fmt.Errorf("marker %q: unexpected character %q", s, c)
		}
	}
	return toks, nil
}

func (p *markerParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *markerParser) or(depth int) (marker, error) {
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.peek() == "or" {
		p.pos++
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = markerOr{l, r}
	}
	return l, nil
}

func (p *markerParser) and(depth int) (marker, error) {
	l, err := p.expr(depth)
	if err != nil {
		return nil, err
	}
	for p.peek() == "and" {
		p.pos++
		r, err := p.expr(depth)
		if err != nil {
			return nil, err
		}
		l = markerAnd{l, r}
	}
	return l, nil
}

func (p *markerParser) expr(depth int) (marker, error) {
	if p.peek() == "(" {
		if depth >= maxMarkerDepth {
			return nil, fmt.Errorf("marker %q: nested too deeply", p.src)
		}
		p.pos++
		m, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.peek() != ")" {
			return nil, fmt.Errorf("marker %q: missing )", p.src)
		}
		p.pos++
		return m, nil
	}
	lhs, err := p.operand()
	if err != nil {
		return nil, err
	}
	var op string
	switch t := p.peek(); t {
	case "<", "<=", "==", "!=", ">=", ">", "~=", "===", "in":
		op = t
		p.pos++
	case "not":
		p.pos++
		if p.peek() != "in" {
			return nil, fmt.Errorf("marker %q: expected \"in\" after \"not\"", p.src)
		}
		p.pos++
		op = "not in"
	default:
		return nil, fmt.Errorf("marker %q: expected a comparison operator, got %q", p.src, t)
	}
	rhs, err := p.operand()
	if err != nil {
		return nil, err
	}
	if lhs.variable == "" && rhs.variable == "" {
		return nil, fmt.Errorf("marker %q: compares two literals", p.src)
	}
	return markerCmp{lhs: lhs, rhs: rhs, op: op}, nil
}

func (p *markerParser) operand() (operand, error) {
	t := p.peek()
	if t == "" {
		return operand{}, fmt.Errorf("marker %q: unexpected end", p.src)
	}
	p.pos++
	if t[0] == '\'' || t[0] == '"' {
		return operand{literal: t[1 : len(t)-1]}, nil
	}
	if n, ok := legacyMarkerNames[t]; ok {
		t = n
	}
	if _, ok := environment[t]; ok || t == "extra" {
		return operand{variable: t}, nil
	}
	return operand{}, fmt.Errorf("marker %q: unknown variable %q", p.src, t)
}
