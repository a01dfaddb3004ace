// Package termsafe makes text chosen by someone else (a guest program, an MCP server or client) safe to print on
// a terminal on the host's behalf: every rune that could drive the terminal is replaced by a visible escape.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clean escapes every rune that is not printable (C0 and C1 controls, DEL, bidi overrides and other format
// characters, invalid UTF-8) so that the text cannot erase lines, forge output, set a title or write the
// clipboard. Printable text, including non-ASCII letters and spaces, is returned unchanged. Invalid bytes
// become \xNN, other runes \uNNNN or \UNNNNNNNN; a backslash is left as it is, so the result is for display,
// not for parsing back.
func Clean(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (!unicode.IsPrint(r) && r != ' ') {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == ' ' || (r != utf8.RuneError && unicode.IsPrint(r)):
			b.WriteString(s[i : i+size])
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	return b.String()
}

// Lines is Clean for multi-line text (a server's stderr tail): newlines and tabs are kept, every other
// control is escaped, and a trailing carriage return on each line is dropped.
func Lines(s string) string {
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		p = strings.TrimSuffix(p, "\r")
		fields := strings.Split(p, "\t")
		for j, f := range fields {
			fields[j] = Clean(f)
		}
		parts[i] = strings.Join(fields, "\t")
	}
	return strings.Join(parts, "\n")
}
