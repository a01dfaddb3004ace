package hostfuncs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// stepsSchema nests levels properties deep; each level reaches a shared allOf of width subschemas through a $ref,
// so every value meets width+3 subschemas (under maxSchemaFan) while the analysis takes about levels×width steps.
func stepsSchema(levels, width int) string {
	wide := `{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{"type":"object"},`, width), ",") + `]}`
	s := `{"type":"object"}`
	for i := 0; i < levels; i++ {
		s = `{"allOf":[{"$ref":"#/$defs/wide"}],"properties":{"x":` + s + `}}`
	}
	return `{"$defs":{"wide":` + wide + `},` + s[1:]
}

// TestSchemaAnalysisStepsBounded: a schema whose fan stays under maxSchemaFan at every level but whose analysis
// would take more than maxCostSteps steps is refused as too complex, and one just under the bound is accepted
// (mutation testing removed the step cap and no test noticed).
func TestSchemaAnalysisStepsBounded(t *testing.T) {
	over := stepsSchema(300, 3600) // about 1.08M steps
	err := NewRegistry().Register(Tool{Name: "t", Parameters: json.RawMessage(over), Handler: nop})
	if !errors.Is(err, ErrInvalidTool) || !strings.Contains(err.Error(), "too complex") {
		t.Fatalf("a %d-byte schema needing ~1.08M analysis steps: %v, want ErrInvalidTool (too complex)", len(over), err)
	}
	under := stepsSchema(200, 3600) // about 0.72M steps
	if err := NewRegistry().Register(Tool{Name: "t", Parameters: json.RawMessage(under), Handler: nop}); err != nil {
		t.Fatalf("a schema needing ~0.72M analysis steps: %v", err)
	}
}
