package hostfuncs

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
)

func nop(context.Context, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`null`), nil
}

// TestGeneralSchemaRefusedAtRegister checks that a parameter schema the general validator cannot check safely
// is refused when the tool is registered, with an error naming the problem: references that loop without
// consuming the arguments (the validator would recurse until the stack overflows and the process dies), remote
// references (nothing is ever fetched or read), and broken schemas.
func TestGeneralSchemaRefusedAtRegister(t *testing.T) {
	for schema, want := range map[string]string{
		`{"$ref":"#"}`: `loop`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"not":{"$ref":"#/$defs/a"}}]}}}`: `loop`,
		`{"type":"object","$defs":{"a":{"if":{"$ref":"#/$defs/a"}}}}`:                                                                                           `loop`,
		`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`:                                                                            `only references inside the schema`,
		`{"type":"object","properties":{"a":{"$ref":"other.json#/x"}}}`:                                                                                         `only references inside the schema`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`:                                                                                       `names nothing`,
		`{"type":"object","properties":{"a":{"$dynamicRef":"#x"}}}`:                                                                                             `$dynamicRef`,
		`{"type":"object","properties":{"a":{"$id":"https://example.com/a"}}}`:                                                                                  `$id`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`:                                                                                  `pattern`,
		`{"type":"object","properties":{"a":{"type":"integr"}}}`:                                                                                                `integr`,
		`{"type":"object","properties":{"a":{"maximum":"ten"}}}`:                                                                                                `maximum`,
	} {
		err := NewRegistry().Register(Tool{Name: "t", Parameters: json.RawMessage(schema), Handler: nop})
		if !errors.Is(err, ErrInvalidTool) || !strings.Contains(err.Error(), want) {
			t.Errorf("schema %s: got %v, want ErrInvalidTool naming %q", schema, err, want)
		}
	}
	for _, ok := range []string{`{"$schema":"https://json-schema.org/draft/2020-12/schema#","type":"object"}`,
		`{"$schema":"http://json-schema.org/draft-07/schema","type":"object","properties":{"a":{"$ref":"#/definitions/x"}},"definitions":{"x":{}}}`} {
		if err := NewRegistry().Register(Tool{Name: "t", Parameters: json.RawMessage(ok), Handler: nop}); err != nil {
			t.Errorf("schema %s refused: %v", ok, err)
		}
	}
	// A reference back to the root under a keyword that descends into the arguments is fine: each step
	// consumes a level of them, and the gate bounds their nesting.
	r := NewRegistry()
	if err := r.Register(Tool{Name: "tree", Handler: nop, Parameters: json.RawMessage(
		`{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}},"v":{"type":"integer"}},"required":["v"]}`)}); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate("tree", json.RawMessage(`{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}`)); err != nil {
		t.Errorf("valid tree refused: %v", err)
	}
	if err := r.Validate("tree", json.RawMessage(`{"v":1,"kids":[{"v":2,"kids":[{"v":"3"}]}]}`)); err == nil {
		t.Error("a deep mistyped member accepted")
	}
}

// TestGeneralSchemaKeywords checks the keywords hand-written schemas use, each accepting and refusing.
func TestGeneralSchemaKeywords(t *testing.T) {
	schema := `{"type":"object","additionalProperties":false,"required":["id"],
		"properties":{
			"id":{"$ref":"#/$defs/id"},
			"n":{"type":"integer","minimum":1,"maximum":10},
			"f":{"type":"number","exclusiveMinimum":0},
			"s":{"type":"string","minLength":2,"maxLength":3,"pattern":"^[a-z]+$","format":"email"},
			"e":{"enum":["a",1,null]},
			"c":{"const":{"k":[1]}},
			"l":{"type":"array","items":{"type":"boolean"},"maxItems":2},
			"u":{"anyOf":[{"type":"string"},{"type":"integer"}]},
			"o":{"oneOf":[{"type":"integer"},{"type":"number","minimum":5}]},
			"a":{"allOf":[{"type":"string"},{"minLength":1}]}},
		"$defs":{"id":{"type":"string","pattern":"^A-[0-9]+$"}}}`
	r := NewRegistry()
	if err := r.Register(Tool{Name: "k", Parameters: json.RawMessage(schema), Handler: nop}); err != nil {
		t.Fatal(err)
	}
	if r.entry("k").fast != nil {
		t.Fatal("this schema took the fast path")
	}
	for doc, ok := range map[string]bool{
		`{"id":"A-1"}`: true, `{"id":"B-1"}`: false, `{}`: false, `{"id":"A-1","z":1}`: false,
		`{"id":"A-1","n":1}`: true, `{"id":"A-1","n":10.0}`: true, `{"id":"A-1","n":0}`: false, `{"id":"A-1","n":11}`: false,
		`{"id":"A-1","n":2.5}`: false, `{"id":"A-1","f":0.5}`: true, `{"id":"A-1","f":0}`: false,
		`{"id":"A-1","s":"ab"}`: true, `{"id":"A-1","s":"a"}`: false, `{"id":"A-1","s":"abcd"}`: false, `{"id":"A-1","s":"aB"}`: false,
		`{"id":"A-1","s":"éé"}`: false, `{"id":"A-1","e":"a"}`: true, `{"id":"A-1","e":1.0}`: true, `{"id":"A-1","e":null}`: true,
		`{"id":"A-1","e":"b"}`: false, `{"id":"A-1","c":{"k":[1]}}`: true, `{"id":"A-1","c":{"k":[2]}}`: false,
		`{"id":"A-1","l":[true,false]}`: true, `{"id":"A-1","l":[true,1]}`: false, `{"id":"A-1","l":[true,true,true]}`: false,
		`{"id":"A-1","u":"x"}`: true, `{"id":"A-1","u":3}`: true, `{"id":"A-1","u":3.5}`: false,
		`{"id":"A-1","o":3}`: true, `{"id":"A-1","o":5.5}`: true, `{"id":"A-1","o":6}`: false, `{"id":"A-1","o":4.5}`: false,
		`{"id":"A-1","a":"x"}`: true, `{"id":"A-1","a":""}`: false,
	} {
		err := r.Validate("k", json.RawMessage(doc))
		if (err == nil) != ok {
			t.Errorf("%s: got %v, want accepted=%v", doc, err, ok)
		}
	}
}

// TestGeneralNumbersBuildNothingBig checks that numbers with huge exponents cost the host no big arithmetic on
// the general path either (the validator there compares float64s; the old one built 10^999999), and that
// they get the verdicts their true values deserve.
func TestGeneralNumbersBuildNothingBig(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(Tool{Name: "b", Handler: nop, Parameters: json.RawMessage(
		`{"type":"object","properties":{"i":{"type":"integer","minimum":0,"maximum":100},"f":{"type":"number","minimum":-1,"maximum":1}}}`)})
	for doc, ok := range map[string]bool{
		`{"i":1e999999}`: false, `{"i":-1e999999}`: false, `{"i":1e999999999}`: false, `{"i":100e-2}`: true,
		`{"f":1.5e-999999}`: true, `{"f":-1.5e-999999}`: true, `{"f":1e-400}`: true, `{"i":1.5e-999999}`: false,
		`{"f":1.0e-9223372036854775808}`: true, `{"f":1e9223372036854775807}`: false, `{"i":0e999999999}`: true,
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := r.Validate("b", json.RawMessage(doc))
		runtime.ReadMemStats(&after)
		if (err == nil) != ok {
			t.Errorf("%s: got %v, want accepted=%v", doc, err, ok)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("%s: validating allocated %d bytes", doc, n)
		}
	}
}

// TestGeneralIntegerFromText checks that type integer is decided from the number's text, as on the fast path,
// even where the nearest float64 is an integer: below 2^52 a fraction the float64 cannot hold is still a fraction.
func TestGeneralIntegerFromText(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(Tool{Name: "i", Handler: nop, Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer","minimum":-5}}}`)})
	r.MustRegister(Tool{Name: "n", Handler: nop, Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"number","minimum":-5}}}`)})
	for _, c := range []struct {
		doc        string
		integer, n bool
	}{
		{`{"x":1.0000000000000001}`, false, true},
		{`{"x":-1.0000000000000001}`, false, true},
		{`{"x":0.99999999999999999}`, false, true},
		{`{"x":1e-400}`, false, true},
		{`{"x":12345678901234567890123}`, true, true},
		{`{"x":1.5e300}`, true, true},
		{`{"x":4503599627370496.5}`, true, true}, // no float64 holds its fraction: an integer to any reader of doubles
		{`{"x":4503599627370495.5}`, false, true},
		{`{"x":1e1000001}`, true, true},
		{`{"x":-4.9999999999999999999}`, false, true},
		{`{"x":-5.0000000000000000001}`, false, false}, // its float64 is the bound, but it is below it
	} {
		if err := r.Validate("i", json.RawMessage(c.doc)); (err == nil) != c.integer {
			t.Errorf("%s against integer: got %v, want accepted=%v", c.doc, err, c.integer)
		}
		if err := r.Validate("n", json.RawMessage(c.doc)); (err == nil) != c.n {
			t.Errorf("%s against number: got %v, want accepted=%v", c.doc, err, c.n)
		}
	}
}
