package hostfuncs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// chain builds n $defs where each applies the next twice, through the given wrapper of two references.
func chain(n int, wrap string) string {
	var defs []string
	for i := range n {
		next := fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i+1)
		defs = append(defs, fmt.Sprintf(`"d%d":%s`, i, strings.ReplaceAll(wrap, "NEXT", next)))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string"}`, n))
	return `{"type":"object","properties":{"a":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// TestExponentialSchemaRefused: a schema of about a kilobyte whose references double at every level would make
// the validator check 2^24 subschemas against one argument (measured before the bound: 16 levels took 8 s of
// host CPU inside a single tool call, where no deadline reaches). It is refused at Register, whether the
// doubling stays on one value (anyOf, allOf) or runs down the arguments (each branch naming the same property).
func TestExponentialSchemaRefused(t *testing.T) {
	for name, wrap := range map[string]string{
		"anyOf":             `{"anyOf":[NEXT,NEXT]}`,
		"allOf":             `{"allOf":[NEXT,NEXT]}`,
		"not and if":        `{"not":NEXT,"if":NEXT}`,
		"down a field":      `{"anyOf":[{"properties":{"x":NEXT}},{"properties":{"x":NEXT}}]}`,
		"down items":        `{"items":NEXT,"contains":NEXT}`,
		"field and pattern": `{"properties":{"x":NEXT},"patternProperties":{"^x$":NEXT}}`,
	} {
		schema := chain(24, wrap)
		err := NewRegistry().Register(Tool{Name: "t", Parameters: json.RawMessage(schema), Handler: nop})
		if !errors.Is(err, ErrInvalidTool) || !strings.Contains(err.Error(), "exponential") {
			t.Errorf("%s (%d bytes): got %v, want ErrInvalidTool about exponential checking", name, len(schema), err)
		}
	}
}

// TestReasonableSchemasAccepted: the bound refuses none of the shapes real tools use: a recursive tree with two
// recursive members, a union of many object variants, nesting through $defs, and a few levels of doubling.
func TestReasonableSchemasAccepted(t *testing.T) {
	var variants []string
	for i := range 200 {
		variants = append(variants, fmt.Sprintf(`{"type":"object","properties":{"kind":{"const":"k%d"},"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}},"required":["kind"]}`, i))
	}
	for name, schema := range map[string]string{
		"binary tree":   `{"type":"object","properties":{"v":{"type":"integer"},"l":{"$ref":"#"},"r":{"$ref":"#"}}}`,
		"tree of lists": `{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}},"v":{"type":"integer"}},"required":["v"]}`,
		"200 variants":  `{"type":"object","properties":{"op":{"oneOf":[` + strings.Join(variants, ",") + `]}}}`,
		"defs":          `{"type":"object","properties":{"a":{"$ref":"#/$defs/p"},"b":{"$ref":"#/$defs/p"}},"$defs":{"p":{"type":"object","properties":{"x":{"$ref":"#/$defs/n"},"y":{"$ref":"#/$defs/n"}}},"n":{"type":"number"}}}`,
		"8 doublings":   chain(8, `{"anyOf":[NEXT,NEXT]}`),
	} {
		r := NewRegistry()
		if err := r.Register(Tool{Name: "t", Parameters: json.RawMessage(schema), Handler: nop}); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
	r := NewRegistry()
	if err := r.Register(Tool{Name: "t", Parameters: json.RawMessage(chain(8, `{"anyOf":[NEXT,NEXT]}`)), Handler: nop}); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate("t", json.RawMessage(`{"a":"s"}`)); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
	if err := r.Validate("t", json.RawMessage(`{"a":1}`)); err == nil {
		t.Error("invalid arguments accepted")
	}
}
