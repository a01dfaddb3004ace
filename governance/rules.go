package governance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RulePolicy is a compiled [PolicySpec]. It is immutable and safe for concurrent use.
type RulePolicy struct {
	spec                PolicySpec
	allowAll            bool
	allow, deny         []string
	approveIrreversible bool
	tools               map[string]*toolRules
}

type toolRules struct {
	effect   Effect
	cost     int64
	approval string
	sources  []Source
	args     []*argRule
}

type argRule struct {
	path     string   // as written in the spec, for reasons
	tokens   []string // the JSON pointer's reference tokens
	equals   any
	hasEq    bool
	oneOf    []any
	noneOf   []any
	min, max *float64
	maxLen   *int
	re       *regexp.Regexp
	optional bool
	onFail   Action
}

// NewPolicy validates and compiles spec. The policy keeps its own copy of everything it needs.
//
// For each call, Evaluate applies in order: the deny list; the allow list (or allow_all); the tool's sources;
// its argument rules (a failing rule denies, or with on_fail: ask needs approval); and the approval rule (the
// tool's approval setting, else approval for irreversible calls unless approve_irreversible is false). The
// verdict carries the tool's effect and cost markings.
func NewPolicy(spec PolicySpec) (*RulePolicy, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	p := &RulePolicy{
		allowAll:            spec.AllowAll,
		allow:               append([]string(nil), spec.Allow...),
		deny:                append([]string(nil), spec.Deny...),
		approveIrreversible: spec.ApproveIrreversible == nil || *spec.ApproveIrreversible,
		tools:               make(map[string]*toolRules, len(spec.Tools)),
	}
	for name, t := range spec.Tools {
		tr := &toolRules{effect: t.Effect, cost: t.Cost, approval: t.Approval, sources: append([]Source(nil), t.Sources...)}
		for _, a := range t.Args {
			r, err := compileArgRule(a)
			if err != nil { // unreachable after Validate
				return nil, fmt.Errorf("%w: tools.%s.args: %w", ErrInvalidPolicy, name, err)
			}
			tr.args = append(tr.args, r)
		}
		p.tools[name] = tr
	}
	p.spec = cloneSpec(spec)
	return p, nil
}

func cloneSpec(s PolicySpec) PolicySpec {
	// A JSON round trip is a deep copy of everything a spec holds.
	b, err := json.Marshal(s)
	if err != nil {
		return s
	}
	var c PolicySpec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		return s
	}
	return c
}

// Spec returns a copy of the spec the policy was compiled from.
func (p *RulePolicy) Spec() PolicySpec { return cloneSpec(p.spec) }

// Limits returns the spec's per-run limits (see PolicySpec.Limits), for GateConfig.Limits.
func (p *RulePolicy) Limits() Limits { return p.spec.Limits() }

func matchAny(patterns []string, name string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// Evaluate implements Policy.
func (p *RulePolicy) Evaluate(_ context.Context, call Call) (Verdict, error) {
	tr := p.tools[call.Tool]
	v := Verdict{Action: Deny}
	if tr != nil {
		v.Effect, v.Cost = tr.effect, tr.cost
	}
	if matchAny(p.deny, call.Tool) {
		v.Reason = "in the deny list"
		return v, nil
	}
	if !p.allowAll && !matchAny(p.allow, call.Tool) {
		v.Reason = "not in the allow list"
		return v, nil
	}
	var asks []string
	if tr != nil {
		if len(tr.sources) > 0 && !containsSource(tr.sources, call.Source) {
			v.Reason = fmt.Sprintf("source %q may not call this tool", call.Source)
			return v, nil
		}
		if len(tr.args) > 0 {
			args, err := decodeArgs(call.Args)
			if err != nil {
				v.Reason = "arguments are not valid JSON"
				return v, nil
			}
			for _, r := range tr.args {
				if why, hard := r.check(args); why != "" {
					if hard || r.onFail != NeedsApproval {
						v.Reason = why
						return v, nil
					}
					asks = append(asks, why)
				}
			}
		}
	}
	effect := call.Effect.Stricter(v.Effect).Resolve()
	approval := ""
	if tr != nil {
		approval = tr.approval
	}
	switch {
	case approval == "always":
		asks = append([]string{"tool requires approval"}, asks...)
	case approval == "" && effect == Irreversible && p.approveIrreversible:
		asks = append([]string{"irreversible call requires approval"}, asks...)
	}
	if len(asks) > 0 {
		v.Action, v.Reason = NeedsApproval, strings.Join(asks, "; ")
		return v, nil
	}
	v.Action, v.Reason = Allow, "allowed by policy"
	return v, nil
}

func containsSource(list []Source, s Source) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// missing marks an argument that is not there.
type missingT struct{}

var missing = missingT{}

func decodeArgs(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func compileArgRule(a ArgRule) (*argRule, error) {
	r := &argRule{path: a.Path, optional: a.Optional, min: a.Min, max: a.Max, maxLen: a.MaxLength}
	switch {
	case a.Path == "":
		return nil, errors.New("path: empty")
	case a.Path[0] == '/':
		for _, t := range strings.Split(a.Path[1:], "/") {
			if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(t, "~0", ""), "~1", ""), "~") {
				return nil, fmt.Errorf("path: invalid JSON pointer %q (~ must be followed by 0 or 1)", a.Path)
			}
			r.tokens = append(r.tokens, strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~"))
		}
	default:
		r.tokens = []string{a.Path}
	}
	ops := 0
	if a.Equals != nil {
		v, err := normalize(a.Equals)
		if err != nil {
			return nil, fmt.Errorf("equals: %w", err)
		}
		r.equals, r.hasEq = v, true
		ops++
	}
	for _, l := range []struct {
		key string
		in  []any
		out *[]any
	}{{"one_of", a.OneOf, &r.oneOf}, {"none_of", a.NoneOf, &r.noneOf}} {
		if l.in == nil {
			continue
		}
		if len(l.in) == 0 {
			return nil, fmt.Errorf("%s: empty list", l.key)
		}
		for i, x := range l.in {
			v, err := normalize(x)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", l.key, i, err)
			}
			*l.out = append(*l.out, v)
		}
		ops++
	}
	for _, f := range []struct {
		key string
		v   *float64
	}{{"min", a.Min}, {"max", a.Max}} {
		if f.v != nil {
			if math.IsNaN(*f.v) || math.IsInf(*f.v, 0) {
				return nil, fmt.Errorf("%s: not a finite number", f.key)
			}
			ops++
		}
	}
	if a.Min != nil && a.Max != nil && *a.Min > *a.Max {
		return nil, fmt.Errorf("min %v is greater than max %v", *a.Min, *a.Max)
	}
	if a.MaxLength != nil {
		if *a.MaxLength < 0 {
			return nil, fmt.Errorf("max_length: must be 0 or more, got %d", *a.MaxLength)
		}
		ops++
	}
	if a.Pattern != "" {
		re, err := regexp.Compile(a.Pattern)
		if err != nil {
			return nil, fmt.Errorf("pattern: %w", err)
		}
		r.re = re
		ops++
	}
	if ops == 0 {
		return nil, errors.New("no condition (want equals, one_of, none_of, min, max, max_length or pattern)")
	}
	switch a.OnFail {
	case "", "deny":
		r.onFail = Deny
	case "ask":
		r.onFail = NeedsApproval
	default:
		return nil, fmt.Errorf("on_fail: invalid value %q (want deny or ask)", a.OnFail)
	}
	return r, nil
}

// normalize turns a Go or decoded-JSON value into the form decodeArgs produces (json.Number for numbers).
func normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeArgs(b)
}

// lookup resolves the rule's pointer in args.
func (r *argRule) lookup(args any) any {
	cur := args
	for _, t := range r.tokens {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return missing
			}
			cur = v
		case []any:
			i, ok := arrayIndex(t)
			if !ok || i >= len(c) {
				return missing
			}
			cur = c[i]
		default:
			return missing
		}
	}
	return cur
}

// check returns why the rule fails for args, or "". hard is set for failures that deny whatever on_fail
// says: a missing argument, or one whose type does not fit the rule.
func (r *argRule) check(args any) (why string, hard bool) {
	v := r.lookup(args)
	name := strconv.Quote(r.path)
	if v == missing {
		if r.optional {
			return "", false
		}
		return "argument " + name + " is missing", true
	}
	if r.hasEq && !jsonEqual(v, r.equals) {
		return "argument " + name + " is not the required value", false
	}
	if r.oneOf != nil && !containsJSON(r.oneOf, v) {
		return "argument " + name + " is not one of the allowed values", false
	}
	if r.noneOf != nil && containsJSON(r.noneOf, v) {
		return "argument " + name + " is one of the forbidden values", false
	}
	if r.min != nil || r.max != nil {
		n, ok := v.(json.Number)
		if !ok {
			return "argument " + name + " is not a number", true
		}
		if r.min != nil && compareNumber(n, *r.min) < 0 {
			return fmt.Sprintf("argument %s is less than %v", name, *r.min), false
		}
		if r.max != nil && compareNumber(n, *r.max) > 0 {
			return fmt.Sprintf("argument %s is more than %v", name, *r.max), false
		}
	}
	if r.maxLen != nil {
		var l int
		switch x := v.(type) {
		case string:
			l = utf8.RuneCountInString(x)
		case []any:
			l = len(x)
		default:
			return "argument " + name + " is neither a string nor a list", true
		}
		if l > *r.maxLen {
			return fmt.Sprintf("argument %s is longer than %d", name, *r.maxLen), false
		}
	}
	if r.re != nil {
		s, ok := v.(string)
		if !ok {
			return "argument " + name + " is not a string", true
		}
		if !r.re.MatchString(s) {
			return fmt.Sprintf("argument %s does not match %q", name, r.re.String()), false
		}
	}
	return "", false
}

func containsJSON(list []any, v any) bool {
	for _, x := range list {
		if jsonEqual(x, v) {
			return true
		}
	}
	return false
}

func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && compareNumbers(x, y) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	default:
		return a == b // string, bool, nil
	}
}

// exactRat parses a JSON number exactly when that is cheap; huge exponents or lengths (which the guest could
// send to make big.Rat allocate without bound) return false.
func exactRat(n json.Number) (*big.Rat, bool) {
	s := string(n)
	if len(s) > 400 {
		return nil, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > 400 || e < -400 {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

func compareNumbers(a, b json.Number) int {
	ra, oka := exactRat(a)
	rb, okb := exactRat(b)
	if oka && okb {
		return ra.Cmp(rb)
	}
	fa, _ := strconv.ParseFloat(string(a), 64) // ±Inf or 0 on overflow/underflow: the right order
	fb, _ := strconv.ParseFloat(string(b), 64)
	return cmpFloat(fa, fb)
}

// compareNumber compares n with the limit f, exactly where possible (so 500.0000000000000001 > 500).
func compareNumber(n json.Number, f float64) int {
	if r, ok := exactRat(n); ok {
		return r.Cmp(new(big.Rat).SetFloat64(f))
	}
	x, _ := strconv.ParseFloat(string(n), 64)
	return cmpFloat(x, f)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// arrayIndex parses a JSON pointer array index: decimal digits without leading zeros.
func arrayIndex(t string) (int, bool) {
	if t == "" || len(t) > 9 || (len(t) > 1 && t[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return 0, false
		}
		n = n*10 + int(t[i]-'0')
	}
	return n, true
}
