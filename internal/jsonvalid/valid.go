// Package jsonvalid reports whether a byte slice is one JSON value, with exactly the answer of encoding/json's
// Valid, in one pass that allocates nothing.
//
// encoding/json's scanner calls a function per byte and keeps a parse stack; for the small documents of tool
// calls (arguments, results) that is most of the cost of checking them. This scanner keeps the kind of up to
// maxDepth enclosing containers in one word and hands deeper documents to encoding/json, which also applies
// its own depth limit.
package jsonvalid

import "encoding/json"

// maxDepth is the nesting this scanner follows itself: one bit per level of a uint64.
const maxDepth = 64

// Valid reports whether data is a valid JSON encoding, as encoding/json.Valid does: one value, with optional
// white space around it; string contents are not checked for valid UTF-8.
func Valid(data []byte) bool {
	var objs uint64 // bit 0 is the innermost open container: 1 an object, 0 an array
	depth, i := 0, 0
value:
	i = skipSpace(data, i)
	if i >= len(data) {
		return false
	}
	switch data[i] {
	case '{', '[':
		if depth == maxDepth {
			return json.Valid(data)
		}
		depth++
		objs <<= 1
		closer := byte(']')
		if data[i] == '{' {
			objs |= 1
			closer = '}'
		}
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == closer {
			i++
			depth--
			objs >>= 1
			goto after
		}
		if objs&1 == 1 {
			goto key
		}
		goto value
	case '"':
		if i = scanString(data, i); i < 0 {
			return false
		}
	case 't':
		if i = literal(data, i, "true"); i < 0 {
			return false
		}
	case 'f':
		if i = literal(data, i, "false"); i < 0 {
			return false
		}
	case 'n':
		if i = literal(data, i, "null"); i < 0 {
			return false
		}
	default:
		if i = scanNumber(data, i); i < 0 {
			return false
		}
	}
after:
	i = skipSpace(data, i)
	if depth == 0 {
		return i == len(data)
	}
	if i >= len(data) {
		return false
	}
	if objs&1 == 1 {
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
			goto key
		case '}':
			i++
			depth--
			objs >>= 1
			goto after
		}
		return false
	}
	switch data[i] {
	case ',':
		i++
		goto value
	case ']':
		i++
		depth--
		objs >>= 1
		goto after
	}
	return false
key:
	if i >= len(data) || data[i] != '"' {
		return false
	}
	if i = scanString(data, i); i < 0 {
		return false
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return false
	}
	i++
	goto value
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanString returns the index after the string that starts with the quote at b[i], or -1.
func scanString(b []byte, i int) int {
	for i++; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-(i+2) < 4 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			i++
		}
	}
	return -1
}

// scanNumber returns the index after the number that starts at b[i], or -1.
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		if i++; i >= len(b) {
			return -1
		}
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		i = digits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		i = digits(b, i+1)
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
