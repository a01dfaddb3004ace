package governance

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// PolicySpec is a declarative policy: which tools may be called, under which argument rules, which need
// approval, and the per-run limits. It is loaded from JSON or YAML with [ParsePolicy] or [LoadPolicyFile],
// which reject unknown and duplicate keys, and compiled with [NewPolicy]; its limits come from
// [PolicySpec.Limits].
//
// Here's an example:
//
//	version: 1
//	allow: [search, get_weather, send_email, "fs_*"]
//	deny: [fs_delete]
//	max_tool_calls: 20          # omitted: 50; 0: no tool calls at all
//	max_cost_units: 100         # omitted: no cost cap
//	max_irreversible: 1         # omitted: no cap of its own (approval still required)
//	tools:
//	  search:      {effect: read_only, cost: 1}
//	  get_weather: {effect: read_only}
//	  send_email:
//	    effect: irreversible    # needs approval (approve_irreversible defaults to true)
//	    max_calls: 3
//	    sources: [agent]        # model-written Python may not send mail
//	    args:
//	      - {path: /to, pattern: '@example\.com$'}
//	  pay:
//	    effect: irreversible
//	    approval: never         # ... except under the limit below
//	    args:
//	      - {path: amount, max: 500, on_fail: ask}   # over 500 needs approval
//	      - {path: currency, one_of: [EUR, USD]}    # anything else is denied
//
// # Notes
//
// Tool names in allow and deny are patterns as in path.Match ("fs_*"); deny wins over allow; a tool in neither
// is denied unless allow_all is true. Keys of tools are exact names; an entry there does not allow the tool.
//
// In a spec, an omitted limit and a limit of zero differ: omitted means the default, zero means none allowed.
type PolicySpec struct {
	// Version is the spec format version: 0 or 1.
	Version int `json:"version,omitempty"`
	// AllowAll allows every tool not denied; without it only tools matching Allow are allowed.
	AllowAll bool `json:"allow_all,omitempty"`
	// Allow and Deny are tool name patterns (path.Match syntax). Deny wins.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// ApproveIrreversible makes every irreversible call (including unmarked tools, whose effect defaults to
	// irreversible) need approval unless its tool says approval: never. Omitted means true.
	ApproveIrreversible *bool `json:"approve_irreversible,omitempty"`
	// Tools holds per-tool rules by exact tool name.
	Tools map[string]ToolSpec `json:"tools,omitempty"`
	// MaxToolCalls caps the calls per run: omitted means DefaultMaxToolCalls, 0 means none.
	MaxToolCalls *int64 `json:"max_tool_calls,omitempty"`
	// MaxCostUnits caps the cost units per run: omitted means no cap, 0 means no call with a cost.
	MaxCostUnits *int64 `json:"max_cost_units,omitempty"`
	// MaxIrreversible caps the irreversible calls per run: omitted means no cap of its own, 0 means none.
	MaxIrreversible *int64 `json:"max_irreversible,omitempty"`
}

// ToolSpec holds the rules for one tool.
type ToolSpec struct {
	// Effect marks the tool: read_only, mutating or irreversible. The stricter of this and the call's own
	// effect applies; if neither is set the tool counts as irreversible.
	Effect Effect `json:"effect,omitempty"`
	// Cost is the tool's cost in units per call (the higher of this and the call's own cost applies).
	Cost int64 `json:"cost,omitempty"`
	// MaxCalls caps the tool's calls per run (0: none).
	MaxCalls *int64 `json:"max_calls,omitempty"`
	// Approval is "" (decided by the effect and approve_irreversible), "always" or "never". Argument rules
	// with on_fail: ask still ask when it is "never".
	Approval string `json:"approval,omitempty"`
	// Sources, if not empty, lists the sources allowed to call the tool (python, agent, container).
	Sources []Source `json:"sources,omitempty"`
	// Args are rules on the call's arguments; every rule must hold.
	Args []ArgRule `json:"args,omitempty"`
}

// ArgRule is a rule on one argument. The argument is found by Path, a JSON pointer (RFC 6901, "/to/0") or a
// bare top-level field name ("amount", meaning "/amount"). Every operator given must hold; a rule needs at least
// one. A missing argument fails the rule unless Optional is set. Values are JSON values; numbers compare by
// value (500 equals 500.0).
//
// When the rule fails, the call is denied, or with OnFail "ask" it needs approval; a missing argument or one of
// the wrong type for the rule (a string for max, a number for pattern) is always denied. Reasons name the argument
// and the rule, never the argument's value (which may be a secret and would reach the audit log).
type ArgRule struct {
	Path      string   `json:"path"`
	Equals    any      `json:"equals,omitempty"`
	OneOf     []any    `json:"one_of,omitempty"`
	NoneOf    []any    `json:"none_of,omitempty"`
	Min       *float64 `json:"min,omitempty"`
	Max       *float64 `json:"max,omitempty"`
	MaxLength *int     `json:"max_length,omitempty"` // strings (in characters) and arrays (in elements)
	Pattern   string   `json:"pattern,omitempty"`    // RE2 syntax, unanchored; strings only
	Optional  bool     `json:"optional,omitempty"`
	OnFail    string   `json:"on_fail,omitempty"` // "deny" (default) or "ask"
}

// ParsePolicy parses a policy spec in format "json", "yaml" (or "yml"), or "" to detect it (a document starting
// with '{' is JSON), and validates it.
//
// # Errors
//
// Every error wraps ErrInvalidPolicy and names the offending key by its path ("tools.send_email.efect"): YAML
// syntax errors, unknown keys (with a suggestion when one is close), duplicate keys, values of the wrong type,
// invalid values, and an empty document.
func ParsePolicy(data []byte, format string) (*PolicySpec, error) {
	switch strings.ToLower(format) {
	case "":
		if t := bytes.TrimLeft(data, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '{' {
			format = "json"
		} else {
			format = "yaml"
		}
	case "json", "yaml", "yml":
	default:
		return nil, fmt.Errorf("%w: unknown format %q (want json or yaml)", ErrInvalidPolicy, format)
	}
	if f := strings.ToLower(format); f == "yaml" || f == "yml" {
		j, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
		}
		data = j
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, fmt.Errorf("%w: empty policy document", ErrInvalidPolicy)
	}
	if err := jsonSyntax(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	if err := checkKeys(data, reflect.TypeFor[PolicySpec]()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var spec PolicySpec
	if err := dec.Decode(&spec); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%w: %s: want %s, got %s", ErrInvalidPolicy, orDefault(te.Field, "(document)"), typeName(te.Type), te.Value)
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the policy document", ErrInvalidPolicy)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &spec, nil
}

// jsonSyntax reports a document that is not JSON by where it breaks (byte offset, line and column), and one
// that ends inside a value as truncated, before its keys are looked at.
func jsonSyntax(data []byte) error {
	if json.Valid(data) {
		return nil
	}
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if strings.Contains(se.Error(), "after top-level value") {
		return nil // one document and then more: said below, as "data after the policy document"
	}
	if strings.Contains(se.Error(), "unexpected end") {
		return fmt.Errorf("the document is truncated: it ends at byte %d inside a value", len(data))
	}
	at := max(min(int(se.Offset)-1, len(data)), 0) // the offending byte
	line, col := 1, 1
	for _, c := range data[:at] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("not valid JSON at byte %d (line %d, column %d): %v", at, line, col, se)
}

func typeName(t reflect.Type) string {
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// LoadPolicyFile reads and parses a policy file. The format comes from the extension (.json, .yaml, .yml),
// otherwise it is detected as in ParsePolicy.
func LoadPolicyFile(name string) (*PolicySpec, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("governance: load policy: %w", err)
	}
	format := ""
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		format = "json"
	case ".yaml", ".yml":
		format = "yaml"
	}
	spec, err := ParsePolicy(data, format)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, name)
	}
	return spec, nil
}

// Limits returns the per-run limits the spec sets, in the form of [Limits] (where zero means the default and
// a negative value means none).
func (s *PolicySpec) Limits() Limits {
	conv := func(p *int64) int64 {
		switch {
		case p == nil:
			return 0
		case *p <= 0:
			return -1
		}
		return *p
	}
	l := Limits{MaxToolCalls: conv(s.MaxToolCalls), MaxCostUnits: conv(s.MaxCostUnits), MaxIrreversible: conv(s.MaxIrreversible)}
	for name, t := range s.Tools {
		if t.MaxCalls != nil {
			if l.ToolCaps == nil {
				l.ToolCaps = make(map[string]int64)
			}
			l.ToolCaps[name] = *t.MaxCalls
		}
	}
	return l
}

// Validate checks the spec and returns every problem found, each wrapping ErrInvalidPolicy and naming its key.
func (s *PolicySpec) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidPolicy, path, fmt.Sprintf(format, args...)))
	}
	if s.Version != 0 && s.Version != 1 {
		bad("version", "unsupported version %d (want 1)", s.Version)
	}
	for _, list := range []struct {
		key      string
		patterns []string
	}{{"allow", s.Allow}, {"deny", s.Deny}} {
		for i, p := range list.patterns {
			if p == "" {
				bad(fmt.Sprintf("%s[%d]", list.key, i), "empty tool name")
			} else if _, err := path.Match(p, ""); err != nil {
				bad(fmt.Sprintf("%s[%d]", list.key, i), "invalid pattern %q: %v", p, err)
			}
		}
	}
	for _, lim := range []struct {
		key string
		v   *int64
	}{{"max_tool_calls", s.MaxToolCalls}, {"max_cost_units", s.MaxCostUnits}, {"max_irreversible", s.MaxIrreversible}} {
		if lim.v != nil && *lim.v < 0 {
			bad(lim.key, "must be 0 or more, got %d", *lim.v)
		}
	}
	names := make([]string, 0, len(s.Tools))
	for name := range s.Tools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t := s.Tools[name]
		tp := "tools." + name
		if name == "" {
			bad("tools", "empty tool name")
		}
		if t.Effect > Irreversible {
			bad(tp+".effect", "invalid effect %d", int(t.Effect))
		}
		if t.Cost < 0 {
			bad(tp+".cost", "must be 0 or more, got %d", t.Cost)
		}
		if t.MaxCalls != nil && *t.MaxCalls < 0 {
			bad(tp+".max_calls", "must be 0 or more, got %d", *t.MaxCalls)
		}
		switch t.Approval {
		case "", "always", "never":
		default:
			bad(tp+".approval", "invalid value %q (want always or never)", t.Approval)
		}
		for i, src := range t.Sources {
			if src == "" || !src.valid() {
				bad(fmt.Sprintf("%s.sources[%d]", tp, i), "invalid source %q (want python, agent or container)", src)
			}
		}
		for i, a := range t.Args {
			if _, err := compileArgRule(a); err != nil {
				bad(fmt.Sprintf("%s.args[%d]", tp, i), "%v", err)
			}
		}
	}
	return errors.Join(errs...)
}

// checkKeys walks the JSON document data against the Go type t and reports the first unknown or duplicate key,
// or invalid text value (such as an effect), by its path. Type mismatches are left to encoding/json.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return (&keyChecker{dec: dec}).value(t, "")
}

type keyChecker struct{ dec *json.Decoder }

var (
	anyType             = reflect.TypeFor[any]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func (k *keyChecker) value(t reflect.Type, p string) error {
	tok, err := k.dec.Token()
	if err != nil {
		return fmt.Errorf("%s: %w", orDefault(p, "(document)"), err)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	kind := t.Kind()
	wrongType := func(got string) error {
		return fmt.Errorf("%s: want %s, got %s", orDefault(p, "(document)"), typeName(t), got)
	}
	switch tok := tok.(type) {
	case nil: // null: leaves the field at its zero value
		return nil
	case bool:
		if kind != reflect.Bool && kind != reflect.Interface {
			return wrongType("true or false")
		}
		return nil
	case json.Number:
		switch kind {
		case reflect.Interface, reflect.Float32, reflect.Float64:
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if _, err := strconv.ParseInt(tok.String(), 10, t.Bits()); err != nil {
				return wrongType("the number " + tok.String())
			}
		default:
			return wrongType("a number")
		}
		return nil
	case string:
		if kind == reflect.Interface {
			return nil
		}
		if reflect.PointerTo(t).Implements(textUnmarshalerType) {
			if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(tok)); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			return nil
		}
		if kind != reflect.String {
			return wrongType("a string")
		}
		return nil
	}
	switch tok.(json.Delim) {
	case '{':
		var fields map[string]reflect.Type
		elem := anyType
		switch kind {
		case reflect.Struct:
			fields = jsonFields(t)
		case reflect.Map:
			elem = t.Elem()
		case reflect.Interface:
		default:
			return wrongType("a mapping")
		}
		seen := make(map[string]bool)
		for k.dec.More() {
			kt, err := k.dec.Token()
			if err != nil {
				return fmt.Errorf("%s: %w", orDefault(p, "(document)"), err)
			}
			key := kt.(string)
			kp := joinPath(p, key)
			if seen[key] {
				return fmt.Errorf("%s: duplicate key", kp)
			}
			seen[key] = true
			ft := elem
			if fields != nil {
				var ok bool
				if ft, ok = fields[key]; !ok {
					where := ""
					if p != "" {
						where = p + ": "
					}
					return fmt.Errorf("%sunknown key %q%s", where, key, suggest(key, fields))
				}
			}
			if err := k.value(ft, kp); err != nil {
				return err
			}
		}
	case '[':
		elem := anyType
		switch kind {
		case reflect.Slice, reflect.Array:
			elem = t.Elem()
		case reflect.Interface:
		default:
			return wrongType("a list")
		}
		for i := 0; k.dec.More(); i++ {
			if err := k.value(elem, p+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	_, err = k.dec.Token() // the closing delimiter
	return err
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

// suggest returns ` (did you mean "x"?)` for the known key closest to key, if one is close.
func suggest(key string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		d := editDistance(strings.ToLower(key), n)
		if d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
