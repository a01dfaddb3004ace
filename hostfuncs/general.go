package hostfuncs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// generalSchema is a parameter schema checked by github.com/google/jsonschema-go, for the schemas the one-pass
// walker (fastschema.go) does not cover.
//
// That validator works on decoded Go values, so the arguments are decoded here, with the numbers converted by
// number: whether a number is an integer is decided as the fast path decides it (isIntegerNumber), and no number
// is ever built beyond a float64. The validator follows a $ref without consuming any of
// the arguments, so a schema whose references loop ({"$ref":"#"}) would recurse until the stack overflows and
// the process dies; compileGeneral refuses such schemas (see checkRefs).
type generalSchema struct {
	rs *jsonschema.Resolved
}

// compileGeneral resolves a parameter schema. Remote references are refused (no loader: nothing is fetched or
// read), and so are the forms of reference checkRefs cannot follow.
func compileGeneral(raw json.RawMessage) (*generalSchema, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if err := checkTypes(doc); err != nil {
		return nil, err
	}
	if err := checkRefs(doc); err != nil {
		return nil, err
	}
	if err := checkCost(doc); err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	switch strings.TrimSuffix(strings.Replace(s.Schema, "http://", "https://", 1), "#") {
	case "", "https://json-schema.org/draft/2020-12/schema":
		s.Schema = ""
	case "https://json-schema.org/draft-07/schema":
		s.Schema = "http://json-schema.org/draft-07/schema#"
	default:
		return nil, fmt.Errorf("$schema %q: only draft 2020-12 (the default) and draft-07 are supported", s.Schema)
	}
	rs, err := s.Resolve(&jsonschema.ResolveOptions{
		BaseURI: "wasmbox:///tools/schema.json",
		Loader: func(u *url.URL) (*jsonschema.Schema, error) {
			return nil, fmt.Errorf("remote reference %s: only references inside the schema are allowed", u)
		},
	})
	if err != nil {
		return nil, err
	}
	return &generalSchema{rs: rs}, nil
}

// validate checks the arguments (valid JSON).
func (g *generalSchema) validate(args []byte) (err error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if v, err = g.numbers(v); err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil { // fail closed on a validator bug
			err = fmt.Errorf("schema validator failed: %v", p)
		}
	}()
	return g.rs.Validate(v)
}

// numbers replaces every json.Number in v by the value the validator compares.
func (g *generalSchema) numbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return g.number(string(x))
	case map[string]any:
		for k, e := range x {
			n, err := g.numbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := g.numbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}

// number converts a JSON number. The validator calls a value an integer when it is an int64 or a float64 with
// no fraction, and compares it as a float64 (as it holds the schema's bounds); so an integer that fits is an
// int64, and any other number is the nearest float64, except where that would change the type (isIntegerNumber
// decides it, as the fast path does): an integer beyond the float64 range becomes ±MaxFloat64, and a
// non-integer that rounds to an integer is moved one step towards its true value (out of the integers).
func (g *generalSchema) number(text string) (any, error) {
	if isIntegerNumber([]byte(text)) {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
		f, _ := strconv.ParseFloat(text, 64) // valid JSON: at worst ErrRange, with ±Inf
		return max(-math.MaxFloat64, min(f, math.MaxFloat64)), nil
	}
	f, _ := strconv.ParseFloat(text, 64) // below 2^52 in magnitude, or isIntegerNumber would have said so
	if _, frac := math.Modf(f); frac != 0 {
		return f, nil
	}
	neg := text[0] == '-'
	if f == 0 { // underflow: the true value lies between 0 and the smallest float64
		if neg {
			return -math.SmallestNonzeroFloat64, nil
		}
		return math.SmallestNonzeroFloat64, nil
	}
	above, ok := beyondInteger(text, uint64(math.Abs(f)))
	if !ok {
		return nil, fmt.Errorf("number %.40s cannot be checked", text)
	}
	if above == neg {
		return math.Nextafter(f, math.Inf(-1)), nil
	}
	return math.Nextafter(f, math.Inf(1)), nil
}

// beyondInteger reports whether |text| (a JSON number that is not an integer, within one step of the integer n
// below 2^52) is above n rather than below it: it is above exactly when its integer part is n. It reads the
// integer part from the digits, building no number beyond a uint64; ok is false if the text is out of reach.
func beyondInteger(text string, n uint64) (above, ok bool) {
	text = strings.TrimPrefix(text, "-")
	mant, exp := text, int64(0)
	if k := strings.IndexAny(text, "eE"); k >= 0 {
		e, err := strconv.ParseInt(text[k+1:], 10, 64)
		if err != nil {
			return false, false
		}
		mant, exp = text[:k], e
	}
	point := int64(len(mant))
	if k := strings.IndexByte(mant, '.'); k >= 0 {
		point = int64(k)
		mant = mant[:k] + mant[k+1:]
	}
	for len(mant) > 0 && mant[0] == '0' {
		mant, point = mant[1:], point-1
	}
	p := point + exp // digits before the decimal point
	if exp > 1<<40 || exp < -(1<<40) || p > 19 {
		return false, false // not within one step of an integer below 2^52
	}
	if p <= 0 {
		return n == 0, true
	}
	digits := mant
	if int64(len(digits)) > p {
		digits = digits[:p]
	}
	ip, err := strconv.ParseUint(digits+strings.Repeat("0", int(p-int64(len(digits)))), 10, 64)
	if err != nil {
		return false, false
	}
	return ip == n, true
}

var typeNames = map[string]bool{"null": true, "boolean": true, "object": true, "array": true, "number": true,
	"string": true, "integer": true}

// checkTypes refuses a "type" that names no JSON Schema type (a typo would otherwise refuse every call).
func checkTypes(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "enum" || k == "const" || k == "default" || k == "examples" {
				continue
			}
			if k == "type" {
				names, _ := e.([]any)
				if s, ok := e.(string); ok {
					names = []any{s}
				}
				for _, n := range names {
					if s, _ := n.(string); !typeNames[s] {
						return fmt.Errorf("type %v is not a JSON Schema type", n)
					}
				}
			}
			if err := checkTypes(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkTypes(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// inPlace are the keywords whose subschemas apply to the same value (the validator recurses into them without
// consuming the arguments); a cycle through them and $ref never ends.
var inPlace = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "not": true, "if": true,
	"then": true, "else": true, "dependentSchemas": true, "dependencies": true}

// checkRefs refuses the references whose targets this package cannot follow exactly as the validator does
// ($dynamicRef, $anchor, $id below the root, and any $ref other than "#" or "#/json/pointer"), and a cycle of
// references and in-place keywords: the validator would follow it until the stack overflows.
func checkRefs(root any) error {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var visit func(ptr string, node any, top bool) error
	visit = func(ptr string, node any, top bool) error {
		obj, ok := node.(map[string]any)
		if !ok {
			if arr, ok := node.([]any); ok {
				for i, e := range arr {
					if err := visit(ptr+"/"+strconv.Itoa(i), e, false); err != nil {
						return err
					}
				}
			}
			return nil
		}
		switch state[ptr] {
		case visiting:
			return fmt.Errorf("the references at %q loop without consuming any argument", "#"+ptr)
		case done:
			return nil
		}
		state[ptr] = visiting
		for _, k := range []string{"$dynamicRef", "$dynamicAnchor", "$anchor", "$recursiveRef"} {
			if _, ok := obj[k]; ok {
				return fmt.Errorf("%s at %q is not supported: use \"$ref\": \"#/$defs/...\"", k, "#"+ptr)
			}
		}
		if _, ok := obj["$id"]; ok && !top {
			return fmt.Errorf("$id at %q is not supported below the schema's root", "#"+ptr)
		}
		if ref, ok := obj["$ref"]; ok {
			s, _ := ref.(string)
			target, err := pointerTarget(root, s)
			if err != nil {
				return fmt.Errorf("$ref %q at %q: %w", s, "#"+ptr, err)
			}
			if err := visit(target, lookup(root, target), target == ""); err != nil {
				return err
			}
		}
		for k, e := range obj {
			if !inPlace[k] {
				continue
			}
			switch sub := e.(type) {
			case []any:
				for i, s := range sub {
					if err := visit(ptr+"/"+escapeToken(k)+"/"+strconv.Itoa(i), s, false); err != nil {
						return err
					}
				}
			case map[string]any:
				if k == "dependentSchemas" || k == "dependencies" {
					for name, s := range sub {
						if err := visit(ptr+"/"+escapeToken(k)+"/"+escapeToken(name), s, false); err != nil {
							return err
						}
					}
				} else if err := visit(ptr+"/"+escapeToken(k), sub, false); err != nil {
					return err
				}
			}
		}
		state[ptr] = done
		return nil
	}
	if err := visit("", root, true); err != nil {
		return err
	}
	// Every other subschema (under properties, items, $defs …) is checked for its own references too.
	var all func(ptr string, node any, top bool) error
	all = func(ptr string, node any, top bool) error {
		switch x := node.(type) {
		case map[string]any:
			if state[ptr] == 0 {
				if err := visit(ptr, x, top); err != nil {
					return err
				}
			}
			for k, e := range x {
				if k == "enum" || k == "const" || k == "default" || k == "examples" {
					continue // values, not schemas
				}
				if err := all(ptr+"/"+escapeToken(k), e, false); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := all(ptr+"/"+strconv.Itoa(i), e, false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return all("", root, true)
}

// pointerTarget returns the JSON pointer a local $ref names, after checking that it exists.
func pointerTarget(root any, ref string) (string, error) {
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return "", errors.New(`only references inside the schema ("#" or "#/...") are allowed`)
	}
	ptr, err := url.PathUnescape(ref[1:])
	if err != nil {
		return "", err
	}
	if lookup(root, ptr) == nil {
		return "", errors.New("it names nothing in the schema")
	}
	return ptr, nil
}

// lookup follows a JSON pointer ("" is the root); nil if it names nothing.
func lookup(root any, ptr string) any {
	if ptr == "" {
		return root
	}
	node := root
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := node.(type) {
		case map[string]any:
			node = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			node = x[i]
		default:
			return nil
		}
		if node == nil {
			return nil
		}
	}
	return node
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
