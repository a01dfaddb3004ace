package hostfuncs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

type diffInner struct {
	A int      `json:"a"`
	B []string `json:"b,omitempty"`
}

type diffArgs struct {
	X int            `json:"x"`
	S string         `json:"s,omitempty" jsonschema:"description=a string"`
	P *float64       `json:"p"`
	I diffInner      `json:"i"`
	M map[string]int `json:"m,omitempty"`
	T time.Time      `json:"t,omitempty"`
	L [][]bool       `json:"l,omitempty"`
}

// diffSchemas are parameter schemas in the fast subset: one derived by Func from a Go struct, and hand-written
// ones with the other forms of the keywords.
func diffSchemas(t testing.TB) map[string]json.RawMessage {
	typed := Func("typed", "", func(context.Context, diffArgs) (int, error) { return 0, nil })
	if typed.err != nil {
		t.Fatal(typed.err)
	}
	return map[string]json.RawMessage{
		"typed":    typed.Parameters,
		"echo":     json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`),
		"empty":    json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		"untyped":  json.RawMessage(`{"properties":{"n":{"type":["integer","null"]},"o":{},"t":true},"required":["n","o"],"additionalProperties":{"type":"array","items":{"type":"number"}}}`),
		"langc":    json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"the tool's input"}},"required":["input"],"additionalProperties":false}`),
		"anything": json.RawMessage(`{"type":"object"}`),
		"enum": json.RawMessage(`{"type":"object","properties":{"units":{"type":"string","enum":["metric","imperial","é","a\"b","\ud83d\ude00","","\ufffd"]},` +
			`"any":{"enum":["x","1","null"]},"tags":{"type":"array","items":{"enum":["a","b"]}}},"required":["units"]}`),
	}
}

var diffDocs = []string{
	`{}`, `[]`, `null`, `1`, `"x"`, `{"x":1}`, `{"x":1.0}`, `{"x":1.5}`, `{"x":1e2}`, `{"x":-0}`, `{"x":1e-2}`,
	`{"x":100e-2}`, `{"x":1e999999999}`, `{"x":"1"}`, `{"x":null}`, `{"x":true}`, `{"x":[1]}`, `{"x":{}}`,
	`{"X":1}`, `{"x":1,"y":2}`, `{"x":1,"p":2,"i":{"a":3}}`, `{"x":1,"p":2.5,"i":{"a":3,"b":["u","v"]}}`,
	`{"x":1,"p":2,"i":{"a":3,"b":[1]}}`, `{"x":1,"p":2,"i":{"a":3,"c":1}}`, `{"x":1,"p":2,"i":{}}`,
	`{"x":1,"p":null,"i":{"a":3}}`, `{"x":1,"p":2,"i":{"a":3},"m":{"k":1,"K":2.0}}`, `{"x":1,"p":2,"i":{"a":3},"m":{"k":"1"}}`,
	`{"x":1,"p":2,"i":{"a":3},"any":null}`, `{"x":1,"p":2,"i":{"a":3},"t":"not a date"}`, `{"x":1,"p":2,"i":{"a":3},"t":5}`,
	`{"x":1,"p":2,"i":{"a":3},"l":[[true,false],[]]}`, `{"x":1,"p":2,"i":{"a":3},"l":[[true,1]]}`, `{"x":1,"p":2,"i":{"a":3},"l":[null]}`,
	`{"\u0078":1}`, `{"x\u0000":1}`, `{"n":null,"o":[]}`, `{"n":2,"o":1,"z":[1,2.5]}`, `{"n":2,"o":1,"z":[1,"2"]}`, `{"n":2.0}`,
	`{"n":"2","o":1}`, `{"input":"hi"}`, `{"input":"hi","extra":1}`, `{"input":5}`, ` { "input" : "a\"}b" } `,
	`{"x":1,"p":2,"i":{"a":3,"b":["]}\"{"]}}`, `{"é":1}`, `{"x":-12345678901234567890123}`,
	`{"x":1e1000000}`, `{"x":1e1000001}`, `{"x":0e1000001}`, `{"x":1.5e-1000000}`, `{"x":0.0e-5}`, `{"x":10.0e-1}`,
	`{"units":"metric"}`, `{"units":"Metric"}`, `{"units":"metr\u0069c"}`, `{"units":"é"}`, `{"units":"\u00e9"}`,
	`{"units":"e\u0301"}`, `{"units":1}`, `{"units":null}`, `{"units":["metric"]}`, `{"units":"a\"b"}`, `{"units":"a\u0022b"}`,
	`{"units":"😀"}`, `{"units":"\ud83d\ude00"}`, `{"units":"\ud83d"}`, `{"units":"\ude00\ud83d"}`, `{"units":""}`, `{"units":"metric "}`,
	`{"units":"imperial","any":1}`, `{"units":"imperial","any":"1"}`, `{"units":"imperial","any":null}`, `{"units":"imperial","any":"null"}`,
	`{"units":"imperial","tags":["a","b","a"]}`, `{"units":"imperial","tags":["a","c"]}`, `{"units":"imperial","tags":[]}`, `{"units":"imperial","tags":"a"}`,
	"{\"units\":\"\xff\"}", "{\"units\":\"\xef\xbf\xbd\"}",
	`{"x":120e-1}`, `{"x":1200.00e-3}`, `{"x":1e9223372036854775807}`, `{"x":1e9223372036854775808}`,
	`{"x":1.0e-9223372036854775808}`, `{"x":-0.000}`, `{"x":1E+0}`, `{"x":1.25E2}`, `{"x":1.25E1}`,
}

// generalValid is the general validator's verdict, as Registry.Validate gives it for a schema outside the fast
// subset.
func generalValid(t testing.TB, schema json.RawMessage, doc string) error {
	g, err := compileGeneral(schema)
	if err != nil {
		t.Fatal(err)
	}
	return g.validate([]byte(doc))
}

// hasDuplicateKey reports an object with two equal keys (the gate refuses those before validation).
func hasDuplicateKey(doc string) bool {
	dec := json.NewDecoder(strings.NewReader(doc))
	type frame struct {
		obj  bool
		key  bool
		seen map[string]bool
	}
	var st []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return false
		}
		if n := len(st); n > 0 && st[n-1].obj && st[n-1].key {
			if tok == json.Delim('}') {
				st = st[:n-1]
				if n > 1 && st[n-2].obj {
					st[n-2].key = true
				}
				continue
			}
			k := tok.(string)
			if st[n-1].seen[k] {
				return true
			}
			st[n-1].seen[k], st[n-1].key = true, false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			st = append(st, frame{obj: tok == json.Delim('{'), key: true, seen: map[string]bool{}})
			continue
		case json.Delim('}'), json.Delim(']'):
			st = st[:len(st)-1]
		}
		if n := len(st); n > 0 && st[n-1].obj {
			st[n-1].key = true
		}
	}
}

func agree(t *testing.T, name string, schema json.RawMessage, fast *fastSchema, doc string) {
	if !json.Valid([]byte(doc)) || hasDuplicateKey(doc) {
		return
	}
	want := generalValid(t, schema, doc)
	got := fast.validate([]byte(doc))
	if (want == nil) != (got == nil) {
		t.Errorf("schema %s, arguments %s: general validator says %v, fast path says %v", name, doc, want, got)
	}
}

// TestFastSchemaAgrees checks that the fast path accepts and refuses exactly what the general validator does,
// for the schemas Func derives and for hand-written ones, over arguments with unknown, missing, mistyped,
// null and case-changed members.
func TestFastSchemaAgrees(t *testing.T) {
	for name, schema := range diffSchemas(t) {
		fast := compileFast(schema)
		if fast == nil {
			t.Fatalf("schema %s is in the fast subset but did not compile: %s", name, schema)
		}
		for _, doc := range diffDocs {
			agree(t, name, schema, fast, doc)
		}
	}
}

// FuzzFastSchema compares the fast path with the general validator on arbitrary arguments.
func FuzzFastSchema(f *testing.F) {
	for _, d := range diffDocs {
		f.Add(d)
	}
	schemas := diffSchemas(f)
	fasts := map[string]*fastSchema{}
	for n, s := range schemas {
		fasts[n] = compileFast(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		for n, s := range schemas {
			agree(t, n, s, fasts[n], doc)
		}
	})
}

// TestFastSchemaFallsBack checks that a schema using any keyword the fast path does not implement keeps the
// general validator (and that such a tool still refuses what its schema refuses).
func TestFastSchemaFallsBack(t *testing.T) {
	for _, s := range []string{
		`{"type":"object","properties":{"n":{"type":"integer","minimum":0}}}`,
		`{"type":"object","properties":{"n":{"enum":[1,2]}}}`,
		`{"type":"object","properties":{"n":{"enum":["a",null]}}}`,
		`{"type":"object","properties":{"n":{"enum":[]}}}`,
		`{"type":"object","properties":{"n":{"$ref":"#/$defs/x"}},"$defs":{"x":{}}}`,
		`{"type":"object","properties":{"s":{"type":"string","pattern":"^a"}}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`,
		`{"type":"object","properties":{"n":false}}`,
		`{"type":"object","properties":{"l":{"type":"array","items":[{"type":"string"}]}}}`,
		`{"type":"object","properties":{"n":{"type":"integer","maxLength":3}},"oneOf":[{}]}`,
	} {
		if compileFast(json.RawMessage(s)) != nil {
			t.Errorf("schema %s compiled to the fast path, which does not implement all of it", s)
		}
	}
	r := NewRegistry()
	err := r.Register(Tool{Name: "pos", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":0}},"required":["n"]}`),
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if r.entry("pos").fast != nil {
		t.Fatal("a schema with minimum took the fast path")
	}
	if err := r.Validate("pos", json.RawMessage(`{"n":-1}`)); err == nil {
		t.Fatal("minimum not enforced")
	}
}

// TestFuncToolsTakeTheFastPath checks that typed Go tools (and the bench's echo) are validated by the fast
// path, and that it refuses what it must with a message naming the problem.
func TestFuncToolsTakeTheFastPath(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(Func("typed", "", func(context.Context, diffArgs) (int, error) { return 0, nil }))
	if r.entry("typed").fast == nil {
		t.Fatal("a Func tool does not take the fast path")
	}
	for doc, want := range map[string]string{
		`{"x":1,"p":2,"i":{"a":3},"X":1}`: `additional property "X"`,
		`{"x":1,"p":2}`:                   `missing required property "i"`,
		`{"x":"1","p":2,"i":{"a":3}}`:     `got string, want integer`,
		`{"x":1,"p":null,"i":{"a":3}}`:    `got null, want number`,
		`{"x":1,"p":2,"i":{"a":3`:         `not JSON`,
	} {
		err := r.Validate("typed", json.RawMessage(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", doc, err, want)
		}
	}
	if err := r.Validate("typed", json.RawMessage(`{"x":1,"p":2,"i":{"a":3,"b":["u"]},"m":{"k":1}}`)); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
}

func BenchmarkValidate(b *testing.B) {
	r := NewRegistry()
	r.MustRegister(Func("typed", "", func(context.Context, diffArgs) (int, error) { return 0, nil }))
	args := json.RawMessage(`{"x":1,"p":2.5,"i":{"a":3,"b":["u","v"]},"m":{"k":1}}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if err := r.Validate("typed", args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("general", func(b *testing.B) {
		e := r.entry("typed")
		for b.Loop() {
			if err := e.schema.validate(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A string enum, which the general validator took on every call before the fast path checked it.
	r.MustRegister(Tool{Name: "weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},` +
		`"units":{"type":"string","enum":["metric","imperial"]}},"required":["city"]}`),
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }})
	wargs := json.RawMessage(`{"city":"Oslo","units":"metric"}`)
	b.Run("enum_fast", func(b *testing.B) {
		if r.entry("weather").fast == nil {
			b.Fatal("the enum schema did not compile to the fast path")
		}
		for b.Loop() {
			if err := r.Validate("weather", wargs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("enum_general", func(b *testing.B) {
		e := r.entry("weather")
		for b.Loop() {
			if err := e.schema.validate(wargs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestIntegerCheckBuildsNoNumber checks that deciding whether 1e999999 is an integer builds no big number: a
// guest could otherwise make the host compute a 3-million-bit power of ten for every number of its arguments.
func TestIntegerCheckBuildsNoNumber(t *testing.T) {
	for _, num := range []string{"1e999999", "1.5e-999999", "123.000e999999"} {
		if n := testing.AllocsPerRun(5, func() { isIntegerText([]byte(num)) }); n != 0 {
			t.Errorf("isIntegerText(%s) allocated %v times", num, n)
		}
	}
}
