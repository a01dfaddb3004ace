package wheels

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// headers is an RFC 822-style header block (METADATA, WHEEL), keyed by lower-case field name, values in order.
type headers map[string][]string

// parseHeaders reads the header block of data as Python's email parser does: "Key: value" lines, continuation
// lines starting with white space; it stops at the first blank line, or at the first line that is not a header
// (the rest is the message body, such as a long description).
//
// A value with continuation lines is joined once, at the end: the cost is linear in the size of data.
func parseHeaders(data []byte) headers {
	h := headers{}
	var last string
	var parts []string // the current value's lines, trimmed
	flush := func() {
		if last != "" {
			vs := h[last]
			vs[len(vs)-1] = strings.Join(parts, " ")
		}
		parts = parts[:0]
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last == "" {
				break
			}
			if t := strings.TrimSpace(line); t != "" {
				parts = append(parts, t)
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			break
		}
		flush()
		last = strings.ToLower(k)
		h[last] = append(h[last], "")
		if t := strings.TrimSpace(v); t != "" {
			parts = append(parts, t)
		}
	}
	flush()
	return h
}

func (h headers) get(k string) string {
	if vs := h[k]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// metadata is what resolution needs from a wheel's METADATA (core metadata, PEP 566 and later).
type metadata struct {
	name           string
	version        version
	requires       []requirement
	requiresPython specifier
	extras         []string // Provides-Extra, normalised
}

// parseMetadata parses METADATA. Any Requires-Dist or Requires-Python that does not parse makes it invalid: a
// dependency cannot be silently dropped.
func parseMetadata(data []byte) (*metadata, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("METADATA is not valid UTF-8")
	}
	h := parseHeaders(data)
	m := &metadata{name: h.get("name")}
	if m.name == "" {
		return nil, fmt.Errorf("METADATA has no Name")
	}
	if !validName(m.name) {
		return nil, fmt.Errorf("METADATA: invalid Name %q", m.name)
	}
	vs := h.get("version")
	if vs == "" {
		return nil, fmt.Errorf("METADATA has no Version")
	}
	v, err := parseVersion(vs)
	if err != nil {
		return nil, fmt.Errorf("METADATA: %v", err)
	}
	m.version = v
	for _, r := range h["requires-dist"] {
		req, err := parseRequirement(r)
		if err != nil {
			return nil, fmt.Errorf("METADATA: Requires-Dist: %v", err)
		}
		m.requires = append(m.requires, req)
	}
	if rp := h.get("requires-python"); rp != "" {
		spec, err := parseSpecifier(rp)
		if err != nil {
			return nil, fmt.Errorf("METADATA: Requires-Python: %v", err)
		}
		m.requiresPython = spec
	}
	for _, e := range h["provides-extra"] {
		m.extras = append(m.extras, Normalize(e))
	}
	return m, nil
}

// parseWheelFile checks a wheel's WHEEL file: Wheel-Version 1.x is required (a later major version is a format
// this installer does not know).
func parseWheelFile(data []byte) error {
	h := parseHeaders(data)
	wv := h.get("wheel-version")
	if wv == "" {
		return fmt.Errorf("WHEEL has no Wheel-Version")
	}
	major, _, _ := strings.Cut(wv, ".")
	if major != "1" {
		return fmt.Errorf("WHEEL: unsupported Wheel-Version %q (want 1.x)", wv)
	}
	return nil
}
