package hostfuncs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// fastSchema validates arguments against a parameter schema that uses only the plain structural keywords:
// type, properties, required, additionalProperties, items, an enum of strings, and the annotations description,
// title, format, default, examples and $comment. That is every schema Func derives from a Go struct (without
// constraint tags) and most hand-written tool schemas. It decides exactly as the general JSON Schema validator
// does for those keywords (TestFastSchemaAgrees and FuzzFastSchema compare the two), in one pass over the bytes
// and without building a document: a tool call's validation is then a fraction of a microsecond instead of
// several.
//
// compileFast returns nil for any schema outside that subset; such tools keep the general validator.
type fastSchema struct {
	any      bool // true or {}: every value
	types    uint8
	props    map[string]*fastSchema
	required []string
	closed   bool                // additionalProperties: false
	extra    *fastSchema         // additionalProperties: a schema (nil: any value)
	items    *fastSchema         // nil: any items
	enum     map[string]struct{} // enum of strings only: the value must be one of them (nil: no enum)
}

const (
	tNull uint8 = 1 << iota
	tBool
	tObject
	tArray
	tNumber
	tString
	tInteger
)

var typeBits = map[string]uint8{"null": tNull, "boolean": tBool, "object": tObject, "array": tArray,
	"number": tNumber, "string": tString, "integer": tInteger}

// maxFastDepth bounds the nesting of a schema compiled to a fastSchema (deeper: the general validator).
const maxFastDepth = 32

func compileFast(schema json.RawMessage) *fastSchema {
	var doc any
	d := json.NewDecoder(bytes.NewReader(schema))
	d.UseNumber()
	if d.Decode(&doc) != nil {
		return nil
	}
	return fastFrom(doc, 0)
}

func fastFrom(doc any, depth int) *fastSchema {
	if depth > maxFastDepth {
		return nil
	}
	if b, ok := doc.(bool); ok {
		if b {
			return &fastSchema{any: true}
		}
		return nil
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	s := &fastSchema{}
	for k, v := range m {
		switch k {
		case "description", "title", "format", "default", "examples", "$comment":
			// annotations: the validator asserts nothing for them (format is not asserted by default)
		case "type":
			switch t := v.(type) {
			case string:
				if typeBits[t] == 0 {
					return nil
				}
				s.types |= typeBits[t]
			case []any:
				if len(t) == 0 {
					return nil
				}
				for _, e := range t {
					n, _ := e.(string)
					if typeBits[n] == 0 {
						return nil
					}
					s.types |= typeBits[n]
				}
			default:
				return nil
			}
		case "properties":
			pm, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			s.props = make(map[string]*fastSchema, len(pm))
			for name, sub := range pm {
				if s.props[name] = fastFrom(sub, depth+1); s.props[name] == nil {
					return nil
				}
			}
		case "required":
			l, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, e := range l {
				n, ok := e.(string)
				if !ok {
					return nil
				}
				s.required = append(s.required, n)
			}
		case "additionalProperties":
			if b, ok := v.(bool); ok {
				s.closed = !b
				continue
			}
			if s.extra = fastFrom(v, depth+1); s.extra == nil {
				return nil
			}
			if s.extra.any {
				s.extra = nil
			}
		case "enum":
			// Only an enum of strings, the common one ("units": "metric" or "imperial"); one with any other
			// member keeps the general validator, which compares numbers and structures by value.
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return nil
			}
			s.enum = make(map[string]struct{}, len(l))
			for _, e := range l {
				str, ok := e.(string)
				if !ok {
					return nil
				}
				s.enum[str] = struct{}{}
			}
		case "items":
			if s.items = fastFrom(v, depth+1); s.items == nil {
				return nil
			}
			if s.items.any {
				s.items = nil
			}
		default:
			return nil
		}
	}
	if s.types == 0 && s.props == nil && s.required == nil && !s.closed && s.extra == nil && s.items == nil && s.enum == nil {
		s.any = true
	}
	return s
}

// validate checks the JSON document b (which json.Valid accepted).
func (s *fastSchema) validate(b []byte) error {
	_, err := s.check(b, skipWS(b, 0))
	if err != nil {
		return err
	}
	return nil
}

// fastError is a refusal and where it happened; the path is built on the way out, so that a valid document
// costs no string building.
type fastError struct {
	path []string // innermost first
	msg  string
}

func (e *fastError) Error() string {
	p := ""
	for i := len(e.path) - 1; i >= 0; i-- {
		p += "/" + e.path[i]
	}
	if p == "" {
		p = "/"
	}
	return "at " + strconv.Quote(p) + ": " + e.msg
}

func refuse(format string, a ...any) *fastError { return &fastError{msg: fmt.Sprintf(format, a...)} }

func (e *fastError) in(step string) *fastError {
	e.path = append(e.path, step)
	return e
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func typeName(t uint8) string {
	for n, bit := range typeBits {
		if t == bit {
			return n
		}
	}
	return "?"
}

// check validates the value that starts at b[i] and returns the index just after it.
func (s *fastSchema) check(b []byte, i int) (int, *fastError) {
	if s == nil || s.any {
		end, _ := valueEnd(b, i)
		return end, nil
	}
	kind := kindOf(b[i])
	if s.types != 0 && s.types&kind == 0 {
		if kind == tNumber && s.types&tInteger != 0 {
			end, _ := valueEnd(b, i)
			if !isIntegerNumber(b[i:end]) {
				return 0, refuse("got %s, want %s", typeName(kind), typesName(s.types))
			}
			if s.enum == nil {
				return end, nil // an integer, with nothing inside it to check
			}
		} else {
			return 0, refuse("got %s, want %s", typeName(kind), typesName(s.types))
		}
	}
	if s.enum != nil {
		if kind != tString {
			return 0, refuse("got %s, want one of the %d allowed strings", typeName(kind), len(s.enum))
		}
		end, _ := valueEnd(b, i)
		if !s.inEnum(b[i:end]) {
			return 0, refuse("the string is not one of the %d allowed", len(s.enum))
		}
		return end, nil
	}
	switch {
	case kind == tObject:
		return s.checkObject(b, i)
	case kind == tArray && s.items != nil:
		j := skipWS(b, i+1)
		if b[j] == ']' {
			return j + 1, nil
		}
		for n := 0; ; n++ {
			var err *fastError
			if j, err = s.items.check(b, j); err != nil {
				return 0, err.in(strconv.Itoa(n))
			}
			j = skipWS(b, j)
			if b[j] == ']' {
				return j + 1, nil
			}
			j = skipWS(b, j+1) // ','
		}
	}
	end, _ := valueEnd(b, i)
	return end, nil
}

// inEnum reports whether the JSON string lit (with its quotes) is one of s.enum once decoded as encoding/json
// decodes it (escapes resolved, invalid UTF-8 replaced), which is how the general validator sees it.
func (s *fastSchema) inEnum(lit []byte) bool {
	text := lit[1 : len(lit)-1]
	if bytes.IndexByte(text, '\\') < 0 && utf8.Valid(text) {
		_, ok := s.enum[string(text)] // no allocation for a lookup
		return ok
	}
	var str string
	if json.Unmarshal(lit, &str) != nil {
		return false
	}
	_, ok := s.enum[str]
	return ok
}

func kindOf(c byte) uint8 {
	switch c {
	case '"':
		return tString
	case '{':
		return tObject
	case '[':
		return tArray
	case 't', 'f':
		return tBool
	case 'n':
		return tNull
	}
	return tNumber
}

func typesName(t uint8) string {
	var names []string
	for _, n := range []string{"null", "boolean", "object", "array", "number", "string", "integer"} {
		if t&typeBits[n] != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return fmt.Sprint(names)
}

func (s *fastSchema) checkObject(b []byte, i int) (int, *fastError) {
	// Required members found, as a bit set while there are at most 64 of them.
	var found uint64
	var foundMore map[string]bool
	j := skipWS(b, i+1)
	if b[j] == '}' {
		j++
	} else {
		for {
			kEnd, _ := valueEnd(b, j)
			// A plain key (no escape, ASCII) is looked up and compared as the bytes it is, without making a
			// string of it; only an error message, or a key that needs decoding, makes one.
			tok := b[j:kEnd]
			raw, plain := tok[1:len(tok)-1], plainKey(tok)
			var decoded string
			if !plain {
				var kerr error
				if decoded, kerr = jsonKey(tok); kerr != nil {
					return 0, refuse("%v", kerr)
				}
				raw = nil
			}
			j = skipWS(b, kEnd)
			j = skipWS(b, j+1) // ':'
			var sub *fastSchema
			var known bool
			if plain {
				sub, known = s.props[string(raw)]
			} else {
				sub, known = s.props[decoded]
			}
			switch {
			case known:
			case s.closed:
				return 0, refuse("additional property %q is not allowed", keyText(raw, decoded, plain))
			default:
				sub = s.extra
			}
			var err *fastError
			if j, err = sub.check(b, j); err != nil {
				return 0, err.in(keyText(raw, decoded, plain))
			}
			for n, r := range s.required {
				if (plain && string(raw) == r) || (!plain && decoded == r) {
					if n < 64 {
						found |= 1 << n
					} else {
						if foundMore == nil {
							foundMore = map[string]bool{}
						}
						foundMore[r] = true
					}
				}
			}
			j = skipWS(b, j)
			if b[j] == '}' {
				j++
				break
			}
			j = skipWS(b, j+1) // ','
		}
	}
	for n, r := range s.required {
		if (n < 64 && found&(1<<n) == 0) || (n >= 64 && !foundMore[r]) {
			return 0, refuse("missing required property %q", r)
		}
	}
	return j, nil
}

// plainKey reports whether the JSON string token tok holds no escape and no non-ASCII byte: its text between
// the quotes is then the key itself.
func plainKey(tok []byte) bool {
	for _, c := range tok[1 : len(tok)-1] {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// keyText is a key as a string, for messages.
func keyText(raw []byte, decoded string, plain bool) string {
	if plain {
		return string(raw)
	}
	return decoded
}

// jsonKey returns the string a JSON string token stands for, decoding it as encoding/json does only when it
// holds an escape or a non-ASCII byte.
func jsonKey(tok []byte) (string, error) {
	inner := tok[1 : len(tok)-1]
	plain := true
	for _, c := range inner {
		if c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", fmt.Errorf("bad key %s: %w", tok, err)
	}
	return s, nil
}

const twoTo52 = 1 << 52 // from here on every float64 is an integer

// isIntegerNumber reports whether a JSON number counts as an integer for `type: integer`: its text says so
// (isIntegerText), or it is too large for a float64 to hold a fraction (2^52 or more in magnitude, the range of
// float64 included), so that any reader of doubles (Python's json, JavaScript, Go's float64) sees an integer.
// Both validators decide by this, the general one because it compares float64s.
func isIntegerNumber(num []byte) bool {
	if isIntegerText(num) {
		return true
	}
	f, _ := strconv.ParseFloat(string(num), 64) // valid JSON: at worst ErrRange, with ±Inf
	return math.Abs(f) >= twoTo52
}

// isIntegerText reports whether a JSON number's text is an integer as math/big decides it: new(big.Rat).
// SetString(num) succeeds and IsInt (the rule of the validator this package used before, kept so that verdicts
// did not change). It decides from the text, without the arithmetic: SetString of "1e999999" builds a
// 3-million-bit number, which a guest could ask for once per number of its arguments. big.Rat refuses a decimal
// exponent (minus the fraction's digits) beyond ±1e6 and one that does not fit an int64; both count as "not an
// integer" here (isIntegerNumber then calls the large ones integers).
func isIntegerText(num []byte) bool {
	plain := true // digits and a sign only: the common case, decided without bytes.IndexAny's set
	for _, c := range num {
		if c == '.' || c == 'e' || c == 'E' {
			plain = false
			break
		}
	}
	if plain {
		return true
	}
	mant, expText := num, []byte(nil)
	if k := bytes.IndexAny(num, "eE"); k >= 0 {
		mant, expText = num[:k], num[k+1:]
	}
	var exp int64
	if expText != nil {
		var err error
		if exp, err = strconv.ParseInt(string(expText), 10, 64); err != nil {
			return false
		}
	}
	if mant[0] == '-' {
		mant = mant[1:]
	}
	intPart, frac := mant, []byte(nil)
	if k := bytes.IndexByte(mant, '.'); k >= 0 {
		intPart, frac = mant[:k], mant[k+1:]
	}
	if bytes.Count(intPart, []byte{'0'})+bytes.Count(frac, []byte{'0'}) == len(intPart)+len(frac) {
		return true // zero, whatever the exponent (big.Rat returns before looking at it)
	}
	e5 := -int64(len(frac)) + exp // wraps as big.Rat's does
	if e5 != 0 {
		n := e5
		if n < 0 {
			if n = -n; n < 0 {
				return false
			}
		}
		if n > 1e6 {
			return false
		}
	}
	if e5 >= 0 {
		return true
	}
	// The value is digits × 10^e5 (digits not all zero): an integer if they end in at least -e5 zeros.
	zeros, nonzero := int64(0), false
	for _, part := range [][]byte{frac, intPart} {
		for i := len(part) - 1; i >= 0; i-- {
			if part[i] != '0' {
				nonzero = true
				break
			}
			zeros++
		}
		if nonzero {
			break
		}
	}
	return zeros >= -e5
}

// valueEnd returns the index just after the JSON value that starts at b[i] (valid JSON), and its kind.
func valueEnd(b []byte, i int) (int, uint8) {
	switch c := b[i]; {
	case c == '"':
		for j := i + 1; ; j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, tString
			}
		}
	case c == '{' || c == '[':
		depth, inStr := 0, false
		for j := i; ; j++ {
			ch := b[j]
			if inStr {
				if ch == '\\' {
					j++
				} else if ch == '"' {
					inStr = false
				}
				continue
			}
			switch ch {
			case '"':
				inStr = true
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					if c == '{' {
						return j + 1, tObject
					}
					return j + 1, tArray
				}
			}
		}
	case c == 't':
		return i + 4, tBool
	case c == 'f':
		return i + 5, tBool
	case c == 'n':
		return i + 4, tNull
	default:
		j := i
		for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || (b[j] >= '0' && b[j] <= '9')) {
			j++
		}
		return j, tNumber
	}
}
