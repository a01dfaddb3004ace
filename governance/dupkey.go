package governance

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// maxArgsDepth bounds the nesting of a call's arguments (objects and arrays).
const maxArgsDepth = 1000

// duplicateKey returns why the JSON document b (valid JSON, as json.Valid checked) is refused: an object in it
// has two members whose keys are equal, or equal under the case folding with which Go's encoding/json matches
// struct fields, or it is nested deeper than maxArgsDepth. It returns "" for a document without either.
//
// With duplicate keys, what a person approves and what a tool acts on can differ: a display may show the first
// "amount", a schema validator, a policy or a decoder may take the last. Refusing them makes every reader agree.
func duplicateKey(b []byte) string {
	// Every member of an object is followed by a ':' (strings may hold more): with fewer than two there is
	// nothing to compare and no need to decode.
	if bytes.Count(b, []byte{':'}) < 2 && bytes.Count(b, []byte{'['})+bytes.Count(b, []byte{'{'}) <= maxArgsDepth {
		return ""
	}
	if reason, decided := duplicateKeyASCII(b); decided {
		return reason
	}
	return duplicateKeyDecoded(b)
}

// The bounds of duplicateKeyASCII's scan, past which it leaves the document to duplicateKeyDecoded.
const (
	asciiScanDepth = 64 // open objects and arrays
	asciiScanKeys  = 64 // keys of the open objects
)

// duplicateKeyASCII is duplicateKey for the common document, without decoding or allocating: it scans b (valid
// JSON; on anything else it may return decided false, and never panics) once and compares the keys of each
// object as written, ignoring case. It decides only documents whose keys are plain ASCII (no escape, no byte
// ≥ 0x80: only then are two keys equal exactly when their bytes are, and equal under encoding/json's folding
// exactly when bytes.EqualFold says so) and that stay within asciiScanDepth and asciiScanKeys; for any other it
// returns decided false.
func duplicateKeyASCII(b []byte) (reason string, decided bool) {
	type span struct{ from, to int }
	var (
		keys   [asciiScanKeys]span
		nkeys  int
		frames [asciiScanDepth]struct {
			object   bool
			keysFrom int // this object's keys are keys[keysFrom:nkeys]
		}
		depth   int
		wantKey bool // in an object, the next string is a key
	)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '{', '[':
			if depth == asciiScanDepth {
				return "", false
			}
			frames[depth].object, frames[depth].keysFrom = c == '{', nkeys
			depth++
			wantKey = c == '{'
		case '}', ']':
			if depth == 0 {
				return "", false // not valid JSON: the decoder says why
			}
			depth--
			nkeys = frames[depth].keysFrom
			wantKey = false
		case ',':
			wantKey = depth > 0 && frames[depth-1].object
		case '"':
			from := i + 1
			plain := true
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					plain = false
					i++
				} else if b[i] >= utf8.RuneSelf {
					plain = false
				}
			}
			if i >= len(b) {
				return "", false
			}
			if !wantKey {
				continue
			}
			wantKey = false
			if !plain || nkeys == asciiScanKeys {
				return "", false
			}
			key := b[from:i]
			for _, k := range keys[frames[depth-1].keysFrom:nkeys] {
				prev := b[k.from:k.to]
				if !bytes.EqualFold(prev, key) {
					continue
				}
				at := " (at depth " + strconv.Itoa(depth) + ")"
				if bytes.Equal(prev, key) {
					return "duplicate key " + strconv.Quote(string(key)) + " in an object of the arguments" + at, true
				}
				return "keys " + strconv.Quote(string(prev)) + " and " + strconv.Quote(string(key)) +
					" of one object of the arguments differ only in case" + at + ", which decoders treat as the same key", true
			}
			keys[nkeys] = span{from, i}
			nkeys++
		}
	}
	return "", true
}

// duplicateKeyDecoded is duplicateKey by way of encoding/json's tokens: for the documents duplicateKeyASCII
// leaves (escaped or non-ASCII keys, which it unescapes and folds fully, and large or deep documents).
func duplicateKeyDecoded(b []byte) string {
	type frame struct {
		object   bool
		wantKey  bool
		n        int               // keys seen
		first    string            // the first key's folded form
		firstRaw string            // and as written
		keys     map[string]string // folded → as written, from the second key on
	}
	var stack []frame
	path := func() string { // where the current object is, for the message
		return "at depth " + strconv.Itoa(len(stack))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // no float parsing: only the structure matters
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			return "arguments are not valid JSON: " + err.Error()
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && stack[top].wantKey {
			if tok == json.Delim('}') {
				stack = stack[:top]
				if top > 0 && stack[top-1].object {
					stack[top-1].wantKey = true
				}
				continue
			}
			key, _ := tok.(string)
			f := &stack[top]
			f.wantKey = false
			folded := foldKey(key)
			f.n++
			switch {
			case f.n == 1:
				f.first, f.firstRaw = folded, key
				continue
			case f.keys == nil:
				f.keys = map[string]string{f.first: f.firstRaw}
			}
			if prev, dup := f.keys[folded]; dup {
				if prev == key {
					return "duplicate key " + strconv.Quote(key) + " in an object of the arguments (" + path() + ")"
				}
				return "keys " + strconv.Quote(prev) + " and " + strconv.Quote(key) + " of one object of the arguments differ only in case (" + path() + "), which decoders treat as the same key"
			}
			f.keys[folded] = key
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxArgsDepth {
				return "arguments are nested deeper than " + strconv.Itoa(maxArgsDepth) + " levels"
			}
			stack = append(stack, frame{object: tok == json.Delim('{'), wantKey: true})
			continue
		case json.Delim(']'), json.Delim('}'):
			stack = stack[:top]
			top--
		}
		if top >= 0 && stack[top].object {
			stack[top].wantKey = true // a member's value is complete
		}
	}
}

// foldKey maps a key to its case-folded form, as encoding/json folds names to match struct fields: every rune
// to the smallest rune of its simple case-folding orbit.
func foldKey(s string) string {
	var out []byte
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return string(out)
}
