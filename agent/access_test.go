package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
)

func accessTool(name string, effect governance.Effect) hostfuncs.Tool {
	t := hostfuncs.Func(name, "A tool.", func(ctx context.Context, in struct {
		Amount float64 `json:"amount"`
	}) (string, error) {
		return "", nil
	})
	t.Effect = effect
	return t
}

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

// The rule: hide only what is refused whatever the arguments; mark what always needs approval; keep the rest.
func TestToolAccess(t *testing.T) {
	ro, irr := accessTool("lookup", governance.ReadOnly), accessTool("pay", governance.Irreversible)
	allowAll := gateView{known: true, approverKnown: true}
	denyApprovals := gateView{known: true, approverKnown: true, approverDenies: true}
	unknownApprover := gateView{known: true}
	for _, tc := range []struct {
		name   string
		view   gateView
		policy governance.Policy
		tool   hostfuncs.Tool
		want   toolAccess
	}{
		{"opaque gate", gateView{}, governance.DenyAllPolicy{}, irr, accessMaybe},
		{"nil policy denies", allowAll, nil, ro, accessNever},
		{"deny-all policy", allowAll, governance.DenyAllPolicy{}, ro, accessNever},
		{"allow-all policy", allowAll, governance.AllowAllPolicy{}, irr, accessMaybe},
		{"effect policy, read-only", allowAll, governance.EffectPolicy{}, ro, accessMaybe},
		{"effect policy, irreversible", allowAll, governance.EffectPolicy{}, irr, accessApproval},
		{"effect policy, irreversible, approvals refused", denyApprovals, governance.EffectPolicy{}, irr, accessNever},
		{"effect policy, irreversible, approver unknown", unknownApprover, governance.EffectPolicy{}, irr, accessApproval},
		{"opaque policy func", allowAll, governance.PolicyFunc(func(context.Context, governance.Call) (governance.Verdict, error) {
			return governance.Verdict{Action: governance.Deny}, nil
		}), ro, accessMaybe},
		{"rules: deny list", allowAll, mustPolicy(t, "allow_all: true\ndeny: [pay]"), irr, accessNever},
		{"rules: not in the allow list", allowAll, mustPolicy(t, "allow: [lookup]"), irr, accessNever},
		{"rules: allowed", allowAll, mustPolicy(t, "allow: [lookup]"), ro, accessMaybe},
		{"rules: other sources only", allowAll, mustPolicy(t, "allow: [lookup]\ntools:\n  lookup: {sources: [agent]}"), ro, accessNever},
		// An argument rule that denies some calls: not certain, so the tool stays.
		{"rules: args may deny", allowAll, mustPolicy(t, "allow: [pay]\ntools:\n  pay: {approval: never, args: [{path: amount, max: 10}]}"), irr, accessMaybe},
		// An argument rule a call with no arguments would fail (missing) must not hide the tool either.
		{"rules: required arg", allowAll, mustPolicy(t, "allow: [lookup]\ntools:\n  lookup: {args: [{path: amount, min: 0}]}"), ro, accessMaybe},
		{"rules: approval always, with args", allowAll, mustPolicy(t, "allow: [lookup]\ntools:\n  lookup: {approval: always, args: [{path: amount, max: 10}]}"), ro, accessApproval},
		{"rules: irreversible asks", allowAll, mustPolicy(t, "allow: [pay]"), irr, accessApproval},
		{"rules: irreversible asks, approvals refused", denyApprovals, mustPolicy(t, "allow: [pay]"), irr, accessNever},
		{"rules: approval never", denyApprovals, mustPolicy(t, "allow: [pay]\ntools:\n  pay: {approval: never}"), irr, accessMaybe},
		{"rules: approve_irreversible false", denyApprovals, mustPolicy(t, "allow: [pay]\napprove_irreversible: false"), irr, accessMaybe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.view
			v.policy = tc.policy
			if got := v.access(tc.tool); got != tc.want {
				t.Errorf("access %d, want %d", got, tc.want)
			}
		})
	}
}

// Tools that always need approval are shown and named as such; refused ones are not shown.
func TestPromptMarksApproval(t *testing.T) {
	ro, irr, gone := accessTool("lookup", governance.ReadOnly), accessTool("pay", governance.Irreversible), accessTool("wipe", governance.Irreversible)
	reg := hostfuncs.NewRegistry().MustRegister(ro, irr, gone)
	view := gateView{known: true, policy: mustPolicy(t, "allow_all: true\ndeny: [wipe]"), approverKnown: true}
	shown, approval, _, err := promptTools(reg, view)
	if err != nil {
		t.Fatal(err)
	}
	sys := renderSystemPrompt(promptData{Stubs: shown.Stubs(), HasTools: true, Approval: approval, Timeout: "1 second", Memory: "1 MiB"})
	if !strings.Contains(sys, "def lookup(") || !strings.Contains(sys, "def pay(") || strings.Contains(sys, "wipe") {
		t.Errorf("stubs:\n%s", sys)
	}
	if !strings.Contains(sys, "Every call of pay waits for a person to approve it before it runs.") {
		t.Errorf("pay is not marked:\n%s", sys)
	}
}
