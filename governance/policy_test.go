package governance_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wasmbox/wasmbox/governance"
)

const specYAML = `
version: 1
allow: [search, get_weather, send_email, pay, "fs_*", anything]
deny: [fs_delete]
max_tool_calls: 20
max_cost_units: 100
max_irreversible: 1
tools:
  search:      {effect: read_only, cost: 1}
  get_weather: {effect: read_only}
  send_email:
    effect: irreversible
    max_calls: 3
    sources: [agent]
    args:
      - {path: /to, pattern: '@example\.com$'}
  pay:
    effect: irreversible
    approval: never
    args:
      - {path: amount, max: 500, on_fail: ask}
      - {path: currency, one_of: [EUR, USD]}
      - {path: /meta/tags, max_length: 2, optional: true}
      - {path: /meta/to~1from, none_of: [blocked], optional: true}
  fs_read: {effect: read_only, approval: always}
`

const specJSON = `{
  "version": 1,
  "allow": ["search", "get_weather", "send_email", "pay", "fs_*", "anything"],
  "deny": ["fs_delete"],
  "max_tool_calls": 20, "max_cost_units": 100, "max_irreversible": 1,
  "tools": {
    "search": {"effect": "read_only", "cost": 1},
    "get_weather": {"effect": "read_only"},
    "send_email": {"effect": "irreversible", "max_calls": 3, "sources": ["agent"],
                   "args": [{"path": "/to", "pattern": "@example\\.com$"}]},
    "pay": {"effect": "irreversible", "approval": "never", "args": [
      {"path": "amount", "max": 500, "on_fail": "ask"},
      {"path": "currency", "one_of": ["EUR", "USD"]},
      {"path": "/meta/tags", "max_length": 2, "optional": true},
      {"path": "/meta/to~1from", "none_of": ["blocked"], "optional": true}]},
    "fs_read": {"effect": "read_only", "approval": "always"}
  }
}`

func mustPolicy(t *testing.T, yaml string) *governance.RulePolicy {
	t.Helper()
	spec, err := governance.ParsePolicy([]byte(yaml), "yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := governance.NewPolicy(*spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyRules(t *testing.T) {
	p := mustPolicy(t, specYAML)
	type want struct {
		action governance.Action
		reason string // substring
		effect governance.Effect
	}
	for _, tc := range []struct {
		name   string
		tool   string
		args   string
		source governance.Source
		effect governance.Effect
		want   want
	}{
		{"allowed read-only", "search", `{"q":"go"}`, "python", 0, want{governance.Allow, "allowed", governance.ReadOnly}},
		{"unknown tool denied", "rm_rf", `{}`, "python", governance.ReadOnly, want{governance.Deny, "not in the allow list", 0}},
		{"deny wins over allow glob", "fs_delete", `{}`, "python", governance.ReadOnly, want{governance.Deny, "deny list", 0}},
		{"glob allow, unmarked is irreversible", "fs_write", `{}`, "python", 0, want{governance.NeedsApproval, "irreversible", 0}},
		{"approval always", "fs_read", `{}`, "python", 0, want{governance.NeedsApproval, "tool requires approval", governance.ReadOnly}},
		{"source not allowed", "send_email", `{"to":"a@example.com"}`, "python", 0, want{governance.Deny, `source "python"`, governance.Irreversible}},
		{"irreversible needs approval", "send_email", `{"to":"a@example.com"}`, "agent", 0, want{governance.NeedsApproval, "irreversible call requires approval", governance.Irreversible}},
		{"pattern fails", "send_email", `{"to":"a@evil.com"}`, "agent", 0, want{governance.Deny, `"/to" does not match`, 0}},
		{"pattern on non-string", "send_email", `{"to":42}`, "agent", 0, want{governance.Deny, "not a string", 0}},
		{"missing arg", "send_email", `{}`, "agent", 0, want{governance.Deny, `"/to" is missing`, 0}},
		{"pay under max, approval never", "pay", `{"amount":500,"currency":"EUR"}`, "agent", 0, want{governance.Allow, "", governance.Irreversible}},
		{"pay over max asks", "pay", `{"amount":500.01,"currency":"EUR"}`, "agent", 0, want{governance.NeedsApproval, `"amount" is more than 500`, 0}},
		{"tiny excess is caught exactly", "pay", `{"amount":500.0000000000000001,"currency":"EUR"}`, "agent", 0, want{governance.NeedsApproval, "more than 500", 0}},
		{"huge exponent", "pay", `{"amount":1e999999999,"currency":"EUR"}`, "agent", 0, want{governance.NeedsApproval, "more than 500", 0}},
		{"amount not a number", "pay", `{"amount":"500","currency":"EUR"}`, "agent", 0, want{governance.Deny, "not a number", 0}},
		{"one_of fails", "pay", `{"amount":5,"currency":"GBP"}`, "agent", 0, want{governance.Deny, `"currency" is not one of`, 0}},
		{"deny beats ask", "pay", `{"amount":900,"currency":"GBP"}`, "agent", 0, want{governance.Deny, "currency", 0}},
		{"max_length", "pay", `{"amount":5,"currency":"USD","meta":{"tags":["a","b","c"]}}`, "agent", 0, want{governance.Deny, "longer than 2", 0}},
		{"escaped pointer none_of", "pay", `{"amount":5,"currency":"USD","meta":{"to/from":"blocked"}}`, "agent", 0, want{governance.Deny, "forbidden", 0}},
		{"optional present and fine", "pay", `{"amount":5,"currency":"USD","meta":{"tags":["a"],"to/from":"ok"}}`, "agent", 0, want{governance.Allow, "", 0}},
		{"args not JSON object", "pay", `[1,2]`, "agent", 0, want{governance.Deny, "missing", 0}},
		{"no args", "pay", ``, "agent", 0, want{governance.Deny, "missing", 0}},
		{"call effect stricter than marking wins", "search", `{}`, "python", governance.Irreversible, want{governance.NeedsApproval, "irreversible", governance.ReadOnly}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := p.Evaluate(context.Background(), governance.Call{Tool: tc.tool, Args: json.RawMessage(tc.args), Source: tc.source, Effect: tc.effect})
			if err != nil {
				t.Fatal(err)
			}
			if v.Action != tc.want.action || !strings.Contains(v.Reason, tc.want.reason) {
				t.Fatalf("verdict = %v %q, want %v containing %q", v.Action, v.Reason, tc.want.action, tc.want.reason)
			}
			if tc.want.effect != 0 && v.Effect != tc.want.effect {
				t.Fatalf("effect marking = %v, want %v", v.Effect, tc.want.effect)
			}
			if strings.Contains(v.Reason, "evil") || strings.Contains(v.Reason, "blocked") {
				t.Fatalf("reason %q leaks an argument value", v.Reason)
			}
		})
	}
}

func TestPolicyThroughGate(t *testing.T) {
	p := mustPolicy(t, specYAML)
	audit := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{Policy: p, Limits: p.Limits(), Approver: governance.AllowAll{}, Auditor: audit})
	run := g.NewRun("r")
	tl := newTool()
	c := governance.Call{Tool: "search", Args: json.RawMessage(`{"q":"x"}`), Source: governance.SourcePython}
	out, err := run.Do(context.Background(), c, tl.fn)
	if err != nil || out.Call.Effect != governance.ReadOnly || out.Call.Cost != 1 {
		t.Fatalf("err %v, call %+v", err, out.Call)
	}
	// max_irreversible: 1 from the spec.
	pay := governance.Call{Tool: "pay", Args: json.RawMessage(`{"amount":10,"currency":"EUR"}`), Source: governance.SourceAgent}
	if _, err := run.Do(context.Background(), pay, tl.fn); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Do(context.Background(), pay, tl.fn); !errors.Is(err, governance.ErrBudgetExceeded) {
		t.Fatalf("second irreversible call: %v", err)
	}
	if _, err := run.Do(context.Background(), governance.Call{Tool: "fs_delete", Source: governance.SourcePython}, tl.fn); !errors.Is(err, governance.ErrDenied) {
		t.Fatalf("denied tool: %v", err)
	}
	recs := audit.Records()
	if last := recs[len(recs)-1]; last.DecidedBy != "policy" || last.Reason != "in the deny list" || last.Effect != governance.Irreversible {
		t.Fatalf("last record %+v", last)
	}
}

func TestPolicyApprovalSwitches(t *testing.T) {
	p := mustPolicy(t, "allow_all: true\ndeny: [rm]\napprove_irreversible: false\ntools: {x: {approval: always}}\n")
	for _, tc := range []struct {
		tool string
		want governance.Action
	}{{"anything", governance.Allow}, {"rm", governance.Deny}, {"x", governance.NeedsApproval}} {
		if v, _ := p.Evaluate(context.Background(), governance.Call{Tool: tc.tool}); v.Action != tc.want {
			t.Fatalf("%s: %v (%s), want %v", tc.tool, v.Action, v.Reason, tc.want)
		}
	}
}

func TestGateCopiesLimits(t *testing.T) {
	caps := map[string]int64{"x": 1}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Limits: governance.Limits{ToolCaps: caps}})
	caps["x"] = 100
	run := g.NewRun("r")
	run.Do(context.Background(), call("x", governance.ReadOnly), newTool().fn)
	if _, err := run.Do(context.Background(), call("x", governance.ReadOnly), newTool().fn); !errors.Is(err, governance.ErrBudgetExceeded) {
		t.Fatalf("changing the caller's map changed the gate: %v", err)
	}
}

func TestCombine(t *testing.T) {
	allow := governance.AllowAllPolicy{}
	ask := governance.PolicyFunc(needsApproval)
	mark := governance.PolicyFunc(func(context.Context, governance.Call) (governance.Verdict, error) {
		return governance.Verdict{Action: governance.Allow, Effect: governance.Mutating, Cost: 4}, nil
	})
	ctx := context.Background()
	if v, _ := governance.Combine(allow, mark).Evaluate(ctx, governance.Call{}); v.Action != governance.Allow || v.Effect != governance.Mutating || v.Cost != 4 {
		t.Fatalf("allow+mark = %+v", v)
	}
	if v, _ := governance.Combine(allow, ask, mark).Evaluate(ctx, governance.Call{}); v.Action != governance.NeedsApproval || v.Reason != "risky" {
		t.Fatalf("with ask = %+v", v)
	}
	if v, _ := governance.Combine(ask, governance.DenyAllPolicy{}, allow).Evaluate(ctx, governance.Call{}); v.Action != governance.Deny {
		t.Fatalf("with deny = %+v", v)
	}
	if v, _ := governance.Combine().Evaluate(ctx, governance.Call{}); v.Action != governance.Deny {
		t.Fatalf("empty = %+v", v)
	}
}

func TestParsePolicyJSONAndYAMLAgree(t *testing.T) {
	y, err := governance.ParsePolicy([]byte(specYAML), "yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := governance.ParsePolicy([]byte(specJSON), "json")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(y, j); d != "" {
		t.Fatalf("YAML and JSON specs differ (-yaml +json):\n%s", d)
	}
	auto, err := governance.ParsePolicy([]byte(specJSON), "")
	if err != nil || cmp.Diff(auto, j) != "" {
		t.Fatalf("auto-detected JSON: %v", err)
	}
	l := y.Limits()
	want := governance.Limits{MaxToolCalls: 20, MaxCostUnits: 100, MaxIrreversible: 1, ToolCaps: map[string]int64{"send_email": 3}}
	if d := cmp.Diff(want, l); d != "" {
		t.Fatalf("limits (-want +got):\n%s", d)
	}
}

func TestPolicySpecLimitsZeroMeansNone(t *testing.T) {
	spec, err := governance.ParsePolicy([]byte("allow_all: true\nmax_tool_calls: 0\nmax_cost_units: 0\nmax_irreversible: 0\ntools: {x: {max_calls: 0}}\n"), "yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := governance.Limits{MaxToolCalls: -1, MaxCostUnits: -1, MaxIrreversible: -1, ToolCaps: map[string]int64{"x": 0}}
	if d := cmp.Diff(want, spec.Limits()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	spec, _ = governance.ParsePolicy([]byte("allow_all: true"), "yaml")
	if d := cmp.Diff(governance.Limits{}, spec.Limits()); d != "" {
		t.Fatalf("omitted limits (-want +got):\n%s", d)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, format, doc string
		want              []string // substrings of the error
	}{
		{"unknown top-level key JSON", "json", `{"allow": ["a"], "alow_all": true}`, []string{`unknown key "alow_all"`, `did you mean "allow_all"`}},
		{"unknown top-level key YAML", "yaml", "allow: [a]\nmax_tool_call: 3\n", []string{`unknown key "max_tool_call"`, `did you mean "max_tool_calls"`}},
		{"unknown nested key JSON", "json", `{"tools": {"send_email": {"efect": "irreversible"}}}`, []string{`tools.send_email: unknown key "efect"`, `"effect"`}},
		{"unknown nested key YAML", "yaml", "tools:\n  pay:\n    args:\n      - {path: amount, maximum: 5}\n", []string{`tools.pay.args[0]: unknown key "maximum"`}},
		{"case matters", "json", `{"Allow": ["a"]}`, []string{`unknown key "Allow"`, `"allow"`}},
		{"duplicate key JSON", "json", `{"deny": ["a"], "deny": []}`, []string{"deny: duplicate key"}},
		{"duplicate key YAML", "yaml", "deny: [a]\ndeny: []\n", []string{"deny"}},
		{"invalid effect", "yaml", "tools:\n  x: {effect: irreverible}\n", []string{"tools.x.effect", `invalid effect "irreverible"`}},
		{"wrong type", "yaml", "max_tool_calls: many\n", []string{"max_tool_calls", "want an integer"}},
		{"wrong type nested", "json", `{"tools": {"x": {"max_calls": "3"}}}`, []string{"tools.x.max_calls: want an integer, got a string"}},
		{"fraction for integer", "yaml", "max_tool_calls: 2.5\n", []string{"max_tool_calls: want an integer, got the number 2.5"}},
		{"mapping for list", "yaml", "allow: {a: 1}\n", []string{"allow: want a list, got a mapping"}},
		{"number for effect", "json", `{"tools": {"x": {"effect": 3}}}`, []string{"tools.x.effect: want a string, got a number"}},
		{"duplicate key inside a value", "json", `{"tools": {"x": {"args": [{"path": "a", "equals": {"k": 1, "k": 2}}]}}}`, []string{"tools.x.args[0].equals.k: duplicate key"}},
		{"negative limit", "yaml", "max_tool_calls: -1\n", []string{"max_tool_calls: must be 0 or more"}},
		{"bad approval", "yaml", "tools: {x: {approval: sometimes}}\n", []string{"tools.x.approval", `"sometimes"`}},
		{"bad source", "yaml", "tools: {x: {sources: [browser]}}\n", []string{"tools.x.sources[0]", "browser"}},
		{"bad pattern", "yaml", "tools: {x: {args: [{path: a, pattern: '('}]}}\n", []string{"tools.x.args[0]", "pattern"}},
		{"rule without condition", "yaml", "tools: {x: {args: [{path: a}]}}\n", []string{"tools.x.args[0]", "no condition"}},
		{"min above max", "yaml", "tools: {x: {args: [{path: a, min: 5, max: 1}]}}\n", []string{"min 5 is greater than max 1"}},
		{"bad on_fail", "yaml", "tools: {x: {args: [{path: a, max: 1, on_fail: maybe}]}}\n", []string{"on_fail"}},
		{"bad glob", "yaml", "allow: ['[']\n", []string{"allow[0]", "invalid pattern"}},
		{"bad version", "yaml", "version: 2\n", []string{"version"}},
		{"empty", "yaml", "", []string{"empty policy"}},
		{"yaml syntax", "yaml", "allow: [a\n", []string{"yaml"}},
		{"trailing JSON", "json", `{"allow":[]} {}`, []string{"after the policy"}},
		{"unknown format", "toml", `allow = []`, []string{`unknown format "toml"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := governance.ParsePolicy([]byte(tc.doc), tc.format)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, governance.ErrInvalidPolicy) {
				t.Fatalf("error %v does not wrap ErrInvalidPolicy", err)
			}
			if !strings.HasPrefix(err.Error(), "governance: ") {
				t.Fatalf("error %q lacks the prefix", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	neg := int64(-2)
	spec := governance.PolicySpec{
		MaxToolCalls: &neg,
		Tools: map[string]governance.ToolSpec{
			"a": {Cost: -1},
			"b": {Approval: "x", Args: []governance.ArgRule{{Path: "q"}}},
		},
	}
	err := spec.Validate()
	for _, w := range []string{"max_tool_calls", "tools.a.cost", "tools.b.approval", "tools.b.args[0]"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("error %v does not mention %s", err, w)
		}
	}
	if _, err := governance.NewPolicy(spec); !errors.Is(err, governance.ErrInvalidPolicy) {
		t.Fatalf("NewPolicy: %v", err)
	}
}

func TestLoadPolicyFile(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{"p.yaml": specYAML, "p.yml": specYAML, "p.json": specJSON, "p.policy": specJSON} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		spec, err := governance.LoadPolicyFile(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(spec.Tools) != 5 {
			t.Fatalf("%s: %d tools", name, len(spec.Tools))
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"allow": [], "unknown": 1}`), 0o600)
	if _, err := governance.LoadPolicyFile(bad); err == nil || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), `"unknown"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := governance.LoadPolicyFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestPolicyIsIsolatedFromSpec(t *testing.T) {
	spec, _ := governance.ParsePolicy([]byte(specYAML), "yaml")
	p, err := governance.NewPolicy(*spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.Deny[0] = "nothing"
	spec.Tools["pay"].Args[1].OneOf[0] = "GBP"
	v, _ := p.Evaluate(context.Background(), governance.Call{Tool: "fs_delete"})
	if v.Action != governance.Deny {
		t.Fatal("changing the spec after NewPolicy changed the policy")
	}
	if got := p.Spec(); got.Deny[0] != "fs_delete" {
		t.Fatalf("Spec() = %v", got.Deny)
	}
}

// A policy that is not JSON is reported where it breaks; one cut short says it is truncated, not that a key is
// unknown.
func TestPolicySyntaxErrorsNamePlace(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"rules": [`, "truncated"},
		{"{\"allow\": [\"a\"],\n \"max_tool_calls\": }", "byte 36 (line 2, column 20)"},
		{`{"allow": ["a"]`, "truncated"},
	} {
		_, err := governance.ParsePolicy([]byte(tc.doc), "json")
		if !errors.Is(err, governance.ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "unknown key") {
			t.Errorf("%q: %v, want an error saying %q", tc.doc, err, tc.want)
		}
	}
}
